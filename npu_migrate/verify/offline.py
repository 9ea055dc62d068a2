"""`npu-migrate verify --compare-dumps REF/dump.json MIGRATED/dump.json`: compare two msprobe
statistics dumps offline (e.g. a CPU/GPU run against a run on an Ascend device).

With statistics only (no samples) and no noise run, each op is judged against its op class's
expected device error (opcompare.CLASS_NOISE)."""

from __future__ import annotations

from pathlib import Path

from .msprobe import DumpError, read_dump
from .opcompare import NOISE_FACTOR, compare_records
from .script import ScriptOutcome


def compare_dump_files(reference: Path, migrated: Path, noise_factor: float = NOISE_FACTOR) -> ScriptOutcome:
    try:
        ref_events, tgt_events = read_dump(Path(reference)), read_dump(Path(migrated))
    except DumpError as error:
        return ScriptOutcome("error", str(error))
    comparison = compare_records(ref_events, tgt_events, None, noise_factor)
    data = {"reference": str(reference), "target": str(migrated), "migrated_root": "",
            "noise": "none (per-op-class tolerances)"}
    if comparison.first is not None:
        return ScriptOutcome("fail", f"first divergence at {comparison.first.site or comparison.first.name}: "
                                     f"{comparison.first.reason}", comparison, None, data)
    return ScriptOutcome("pass", f"{comparison.matched} ops match within the per-op-class tolerances",
                         comparison, None, data)

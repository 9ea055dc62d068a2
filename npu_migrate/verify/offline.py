"""Offline comparisons of msprobe dumps (docs/verify.md, "msprobe dumps").

- `npu-migrate verify --compare-dumps REF/dump.json MIGRATED/dump.json`: two dumps taken at the
  same level (ours at the aten level, or two msprobe API-level dumps).
- `npu-migrate verify --original A [--migrated B] --device-dump DEVICE/dump.json -- train.py ARGS`:
  an msprobe L1 dump taken on a device, aligned by API name with a reference run of the original
  recorded at the same level (its noise run gives the tolerances).

With statistics only (no samples) each API is judged on its statistics; without a noise run
against its op class's expected device error (opcompare.CLASS_NOISE).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .apicapture import api_base
from .msprobe import DumpError, dump_level, locate, read_dump
from .opcompare import NOISE_FACTOR, compare_records
from .script import ScriptError, ScriptOptions, ScriptOutcome, _error_line, _References, check


def compare_dump_files(reference: Path, migrated: Path, noise_factor: float = NOISE_FACTOR) -> ScriptOutcome:
    try:
        levels = {dump_level(Path(reference)), dump_level(Path(migrated))}
        ref_events, tgt_events = read_dump(Path(reference)), read_dump(Path(migrated))
    except DumpError as error:
        return ScriptOutcome("error", str(error))
    if len(levels) > 1:
        return ScriptOutcome("error", f"{migrated}: its API names (msprobe L0/L1) do not line up with the aten-level "
                                      f"names of {reference}; take both at the same level, or align a device's L1 "
                                      "dump with a reference run: --original TREE --device-dump DUMP -- SCRIPT")
    if "api" in levels:
        ref_events, tgt_events = _by_api(ref_events), _by_api(tgt_events)
    comparison = compare_records(ref_events, tgt_events, None, noise_factor)
    data = {"reference": str(reference), "target": str(migrated), "migrated_root": "",
            "noise": "none (per-op-class tolerances)"}
    if comparison.first is not None:
        return ScriptOutcome("fail", f"first divergence at {comparison.first.site or comparison.first.name}: "
                                     f"{comparison.first.reason}", comparison, None, data)
    return ScriptOutcome("pass", f"{comparison.matched} ops match within the per-op-class tolerances",
                         comparison, None, data)


def _by_api(events: list[dict[str, Any]], root: Path | None = None) -> list[dict[str, Any]]:
    """Forward API calls keyed by the API alone (prefix and call index dropped: msprobe names a
    call by the namespace it came through, torch's function mode by the function), one step."""
    out = []
    for event in events:
        if event.get("phase") != "forward" or event["name"].startswith("Module."):
            continue
        site = locate(event.get("stack") or [], root) if root is not None else event.get("site")
        out.append({**event, "kind": "op", "api": event["name"], "name": api_base(event["name"]), "step": None,
                    "site": site})
    return out


def compare_device_dump(options: ScriptOptions, dump: Path) -> ScriptOutcome:
    """Align an msprobe L1 dump taken on a device with a reference run of `options.original`
    recorded by API, and judge each API against the noise run's distance (or its op class)."""
    try:
        check(options)
        device_events = read_dump(Path(dump))
    except (DumpError, ScriptError) as error:
        return ScriptOutcome("error", str(error))
    import tempfile

    options.api_level = True
    tree = Path(options.migrated)
    with tempfile.TemporaryDirectory(prefix="npu-migrate-verify-") as tmp:
        runs = _References(options, {}, Path(tmp))
        reference = runs.get("reference", [])
        if reference.get("error"):
            return ScriptOutcome("error", _error_line("the original script failed on the reference side",
                                                      reference["error"], options.original))
        noise = runs.get("noise", ["conv", "matmul"]) if options.noise_run else None

    def api_events(result: dict[str, Any] | None) -> list[dict[str, Any]] | None:
        if result is None or result.get("error"):
            return None
        return [{**e, "kind": "op", "api": e["name"], "name": api_base(e["name"]), "step": None}
                for e in result["record"] if e["kind"] == "api"]

    ref_events = api_events(reference) or []
    comparison = compare_records(ref_events, _by_api(device_events, tree), api_events(noise), options.noise_factor)
    data = {"reference": reference.get("backend"), "target": f"msprobe dump {dump}", "migrated_root": str(tree),
            "original_root": str(options.original), "reference_store": runs.report(),
            "noise": noise.get("backend") if noise else "none (per-op-class tolerances)"}
    if comparison.first is not None:
        return ScriptOutcome("fail", f"first divergence at {comparison.first.site or comparison.first.name}: "
                                     f"{comparison.first.reason}", comparison, None, data)
    return ScriptOutcome("pass", f"{comparison.matched} API calls of the device dump match the reference "
                                 f"within the measured noise", comparison, None, data)

"""Script mode: `npu-migrate verify --original A --migrated B [--steps N] -- train.py ARGS...`.

Runs the user's unmodified script in each tree (three processes: the original as reference, the
original with the device's precision as the noise estimate, the migrated code on the device or its
emulation), for N training steps (N `backward()` calls), and reports the first divergence at the
migrated tree's `path.py:LINE`. See docs/verify.md.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npu_migrate.core.diagnostics import Diagnostic, Report, Severity, Table

from . import msprobe
from .opcompare import NOISE_FACTOR, Comparison, coarsest_dtype, compare_records

EXIT = {"pass": 0, "fail": 1, "error": 2}

EMULATION_SCOPE = (
    "Emulated PASS: the migrated script runs, places every tensor on the device (audited), seeds and "
    "computes the same numbers as the original within the noise the device's precision causes (HF32; "
    "under autocast, the device's op lists, taken to be CUDA's). It does not prove the device's own "
    "kernels, fp16 accumulation, the device allocator's memory figures (the peaks compared are tensor "
    "storage), speed, or multi-device collectives: run on an Ascend device "
    "(or compare an msprobe dump taken there) for those.")


class ScriptError(Exception):
    """Bad script-mode arguments: reported in one line with exit 2."""


@dataclass
class ScriptOptions:
    original: Path
    migrated: Path
    script: str
    args: list[str] = field(default_factory=list)
    steps: int = 2
    seed: int | None = 0
    reference: str = "cpu"
    backing: str = "cpu"
    rng: str = "align"  # "align": the device stream follows the CPU's; "device": its own stream
    device_precision: bool = False
    fp16_accumulation: bool = False  # with device_precision: float16 matmuls accumulate in float16
    noise_run: bool = True
    noise_factor: float = NOISE_FACTOR
    timeout: float = 600.0
    dump: Path | None = None
    env: dict[str, str] | None = None
    portable: bool = False  # one tree: the reference runs it on plain CPU torch, as it is
    target_device: str = "npu"  # "npu" (a device or the emulation) or "cuda" (a GPU; portable code)
    memory: bool = True  # measure the peak memory of both sides
    max_peak: int | None = None  # budget of the migrated side's peak, bytes
    max_peak_ratio: float | None = None  # budget of migrated / reference peak
    reference_store: Path | None = None  # keep and reuse reference and noise runs here (store.py)
    api_level: bool = False  # record torch API calls (msprobe's L1 names) instead of aten ops


@dataclass
class ScriptOutcome:
    verdict: str
    reason: str
    comparison: Comparison | None = None
    error: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)  # not in to_dict

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    @property
    def location(self) -> str | None:
        first = self.comparison.first if self.comparison else None
        if first is not None:
            return first.site
        if self.error:
            return self.error.get("location")
        if self.data.get("missing_move"):
            return self.data["missing_move"]["mapped_site"]
        return (self.data.get("memory") or {}).get("blame") if self.verdict == "fail" else None

    def sites(self) -> list[str]:
        """Every migrated-tree file:line the outcome names (the divergence, the line that built its
        module, the ops only one side runs, where a CPU tensor was made, where the code raised)."""
        import re

        found = []
        first = self.comparison.first if self.comparison else None
        if first is not None:
            found += [first.site, (first.module or {}).get("built")]
            found += [op.get("site") for op in first.extra_ops[:1]]
            found += [op.get("mapped_site") for op in first.missing_ops[:1]]
        found.append((self.data.get("memory") or {}).get("blame"))
        found.append((self.data.get("missing_move") or {}).get("mapped_site"))
        if self.error:
            found.append(self.error.get("location"))
            found += [move["mapped_site"] for move in self.error.get("missing_moves", [])[:1]]
            found.append((self.error.get("missing_before") or {}).get("mapped_site"))
            root = str(Path(self.data.get("migrated_root", ".")).resolve()) + os.sep
            chain = re.search(r"made at ([^)]*)", self.error.get("message", ""))
            for made in (chain.group(1).split(" < ") if chain else []):
                found.append(made.removeprefix(root))
        return [line for site in found if site for line in _expand(site)]

    def findings(self) -> list[Diagnostic]:
        root = str(self.data.get("migrated_root", "."))
        first = self.comparison.first if self.comparison else None
        out = []
        if first is not None:
            code = "VER005" if first.kind == "seed" else "VER001"
            out.append(_diagnostic(code, _divergence_text(first), root, first.site))
        if self.error and self.verdict == "fail":
            code = "VER004" if "placement audit" in self.error.get("message", "") else "VER002"
            out.append(_diagnostic(code, f"migrated script raised {self.error['type']}: {self.error['message']}",
                                   root, self.error.get("location")))
        if self.data.get("missing_move"):
            out.append(_diagnostic("VER004", self.reason.partition(": ")[2], root, self.location))
        memory = self.data.get("memory") or {}
        for failure in memory.get("failures", []):
            out.append(_diagnostic("VER003", f"{failure}{memory.get('blame_text', '')}", root, memory.get("blame")))
        return out

    def to_dict(self) -> dict[str, Any]:
        comparison = self.comparison
        return {"verdict": self.verdict, "exit_code": self.exit_code, "reason": self.reason,
                "location": self.location, "error": self.error,
                "first_divergence": comparison.first.to_dict() if comparison and comparison.first else None,
                "matched_ops": comparison.matched if comparison else 0,
                "only_original_ops": comparison.only_reference if comparison else 0,
                "only_migrated_ops": comparison.only_migrated if comparison else 0,
                "worst_ratio_to_tolerance": comparison.worst_ratio if comparison else None,
                "findings": [d.to_dict() for d in self.findings()], "sites": self.sites(),
                "ops": comparison.rows if comparison else [], **self.data}

    def report(self, max_rows: int = 50) -> Report:
        summary: dict[str, Any] = {"verdict": self.verdict.upper(), "reason": self.reason}
        if self.location:
            summary["location"] = self.location
        for key in ("reference", "noise", "target", "steps", "steps_run", "tf32"):
            if key in self.data:
                summary[key.replace("_", " ")] = self.data[key]
        if self.comparison:
            summary["ops"] = (f"{self.comparison.matched} compared, {self.comparison.only_reference} only in the "
                              f"original, {self.comparison.only_migrated} only in the migrated code")
        memory = self.data.get("memory") or {}
        if memory.get("text"):
            summary["peak memory"] = memory["text"]
        if self.data.get("scope"):
            summary["what this proves"] = self.data["scope"]
        report = Report("npu-migrate verify (script mode)", summary=summary)
        first = self.comparison.first if self.comparison else None
        if first is not None:
            module = first.module or {}
            rows = [["kind", first.kind], ["op", first.name], ["at", first.site or "?"],
                    ["original at", first.reference_site or "?"], ["step", str(first.step)],
                    ["module", f"{module.get('path', '-')} ({module.get('class', '-')}, built at "
                               f"{module.get('built') or '?'})" if module else "-"],
                    ["why", first.reason]]
            if first.extra_ops:
                rows.append(["just before", ", ".join(f"{e['name']} at {e['site']}" for e in first.extra_ops[:5])])
            report.tables.append(Table("First divergence", ["", ""], rows))
        if self.comparison and self.comparison.rows:
            report.tables.append(_ops_table(self.comparison, max_rows))
        report.findings = self.findings()
        return report


def _ops_table(comparison: Comparison, max_rows: int) -> Table:
    """msprobe's columns beside our verdict, for the ops that matter most: those just before the
    first divergence and the ones closest to their tolerance (all of them with --max-rows 0)."""
    rows = comparison.rows
    if max_rows and len(rows) > max_rows:
        first = comparison.first.seq if comparison.first else None
        before = [r for r in rows if first is not None and r["seq"] is not None and r["seq"] <= first][-(max_rows // 2):]
        closest = sorted(rows, key=lambda r: -((r["distance"] or 0.0) / (r["tolerance"] or 1e-30)))
        chosen = {id(r): r for r in before}
        for row in closest:
            if len(chosen) >= max_rows:
                break
            chosen.setdefault(id(row), row)
        rows = sorted(chosen.values(), key=lambda r: r["seq"] or 0)

    def number(value: Any) -> str:
        return "-" if value is None else f"{value:.6g}"

    table = [[r["op"], r["site"] or "?", str(r["step"]), "x".join(map(str, r["shape"] or [])), r["dtype"] or "",
              number(r["Cosine"]), number(r["MaxAbsErr"]), number(r["MaxRelativeErr"]),
              number(r["One Thousandth Err Ratio"]), number(r["Five Thousandth Err Ratio"]),
              f"{number(r['distance'])} / {number(r['tolerance'])}", r["result"]] for r in rows]
    return Table(f"Ops ({len(rows)} of {len(comparison.rows)} compared; msprobe's columns over the sample, "
                 "then our distance / tolerance)",
                 ["op", "at", "step", "shape", "dtype", "Cosine", "MaxAbsErr", "MaxRelativeErr",
                  "One Thousandth Err Ratio", "Five Thousandth Err Ratio", "distance / tolerance", "result"], table)


def _expand(site: str) -> list[str]:
    """"f.py:3-5" (a call over several lines) -> ["f.py:3-5", "f.py:3", "f.py:4", "f.py:5"]."""
    file, _, lines = site.rpartition(":")
    start, dash, end = lines.partition("-")
    if not dash or not (start.isdigit() and end.isdigit()):
        return [site]
    return [site] + [f"{file}:{n}" for n in range(int(start), int(end) + 1)]


def _diagnostic(code: str, message: str, root: str, site: str | None) -> Diagnostic:
    file, _, line = (site or "?:0").rpartition(":")
    path = file if os.path.isabs(file) else f"{root}/{file}"
    line = line.partition("-")[0]
    return Diagnostic(code, message, path, int(line) if line.isdigit() else 0, 0, Severity.ERROR)


def line_unchanged(original_root: Path | str, migrated_root: Path | str, site: str) -> bool:
    """Whether the original's line `site` (file:line) is kept as it is in the migrated tree."""
    file, _, line = site.rpartition(":")
    try:
        before = (Path(original_root) / file).read_text().splitlines()
        after = (Path(migrated_root) / file).read_text().splitlines()
    except OSError:
        return True
    target = int(line) - 1
    return any(tag == "equal" and i1 <= target < i2 for tag, i1, i2, _, _ in
               difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes())


def site_mapper(original_root: Path | str, migrated_root: Path | str) -> Any:
    """map_line with the alignment of each file computed once."""
    import functools

    return functools.lru_cache(maxsize=None)(lambda site: map_line(Path(original_root), Path(migrated_root), site))


def map_line(original_root: Path, migrated_root: Path, site: str | None) -> str | None:
    """The migrated tree's line that stands where `site` (file:line of the original tree) was."""
    if not site:
        return None
    file, _, line = site.rpartition(":")
    try:
        before = (Path(original_root) / file).read_text().splitlines()
        after = (Path(migrated_root) / file).read_text().splitlines()
    except OSError:
        return None
    target = int(line) - 1
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if i1 <= target < i2 or (i1 == i2 == target):
            mapped = j1 + (target - i1 if tag == "equal" else 0)
            if tag == "replace":  # the most similar of the lines that replaced it
                mapped = max(range(j1, j2), key=lambda j: difflib.SequenceMatcher(
                    None, before[target], after[j], autojunk=False).ratio())
            return f"{file}:{min(mapped, max(len(after) - 1, 0)) + 1}"
    return None


def _divergence_text(first: Any) -> str:
    module = first.module or {}
    inside = f" in {module.get('path')} ({module.get('class')}, built at {module.get('built')})" if module else ""
    step = "before the first step" if first.step in (None, -1) else f"in step {first.step}"
    text = f"first divergence {step}: {first.name}{inside}: {first.reason}"
    if first.extra_ops:
        text += f"; just before it the migrated code runs ops the original does not: " \
                f"{first.extra_ops[0]['name']} at {first.extra_ops[0]['site']}"
    elif first.missing_ops and first.missing_ops[0].get("mapped_site"):
        text += f"; just before it the original runs ops the migrated code does not: " \
                f"{first.missing_ops[0]['name']} (migrated {first.missing_ops[0]['mapped_site']})"
    return text


def check(options: ScriptOptions) -> None:
    if not options.script:
        raise ScriptError("script mode needs a script after --, e.g. -- train.py --epochs 1")
    for label, root in (("--original", options.original), ("--migrated", options.migrated)):
        if not Path(root).is_dir():
            raise ScriptError(f"{root}: {label} is not a directory")
        if not (Path(root) / options.script).is_file():
            raise ScriptError(f"{Path(root) / options.script}: script not found ({label} tree)")
    if options.steps < 1:
        raise ScriptError(f"--steps {options.steps}: must be at least 1")
    if options.rng not in ("align", "device"):
        raise ScriptError(f"--rng {options.rng}: 'align' or 'device'")
    if options.target_device not in ("npu", "cuda") or (options.target_device == "cuda" and not options.portable):
        raise ScriptError(f"device {options.target_device!r}: the migrated side runs on 'npu' (or 'cuda' for portable code)")
    if not options.memory and (options.max_peak is not None or options.max_peak_ratio is not None):
        raise ScriptError("--max-peak/--max-peak-ratio need the peak-memory measurement that --no-memory turns off")


def _job(options: ScriptOptions, side: str, root: Path, out: Path) -> dict[str, Any]:
    return {"side": side, "root": str(Path(root).resolve()), "script": options.script, "args": options.args,
            "steps": options.steps, "seed": options.seed, "reference": options.reference,
            "backing": options.backing, "rng": options.rng, "device_precision": options.device_precision,
            "fp16_accumulation": options.fp16_accumulation, "memory": options.memory, "api_level": options.api_level,
            "original_root": str(Path(options.original).resolve()), "portable": options.portable,
            "target_device": options.target_device, "out": str(out)}


def _in_tree(entry: str, original_root: str | None, root: str) -> str:
    """A PYTHONPATH entry inside the original tree, seen from the side running `root`: the same
    folder in that tree (so the migrated side imports the migrated copy of the user's packages)."""
    if not original_root:
        return entry
    try:
        inner = Path(entry).resolve().relative_to(original_root)
    except ValueError:
        return entry
    return str(Path(root) / inner)


def run_side(job: dict[str, Any], options: ScriptOptions, workdir: Path) -> dict[str, Any]:
    """Run one side in a fresh interpreter; returns its result (or an error result)."""
    job_file = workdir / f"{job['side']}-{abs(hash(job['root'])) % 10**8}.json"
    job_file.write_text(json.dumps(job))
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[2])
    user_path = [_in_tree(entry, job.get("original_root"), job["root"])
                 for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    env["PYTHONPATH"] = os.pathsep.join([package_parent, *user_path])
    env.update(options.env or {})
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "npu_migrate.verify.script_runner", str(job_file)],
                              capture_output=True, text=True, env=env, timeout=options.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"side": job["side"], "timed_out": True, "error": {
            "type": "Timeout", "message": f"the {job['side']} side timed out after {options.timeout:g} s "
                                          "(raise --timeout or lower --steps)", "phase": "script", "location": None}}
    import torch

    if not Path(job["out"]).is_file():
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return {"side": job["side"], "error": {"type": "Crash", "phase": "script", "location": None,
                                               "message": f"the {job['side']} process died (exit {proc.returncode}): "
                                                          f"{lines[-1] if lines else 'no output'}"}}
    result = torch.load(job["out"], weights_only=False)
    result["wall_s"] = round(time.perf_counter() - started, 3)
    return result


def verify_script(options: ScriptOptions, cache: dict[tuple, dict[str, Any]] | None = None) -> ScriptOutcome:
    """`cache` (optional) keeps reference and noise results for reuse by cases sharing the original;
    `options.reference_store` keeps them on disk for later calls (store.py)."""
    try:
        check(options)
    except ScriptError as error:
        return ScriptOutcome("error", str(error))
    cache = {} if cache is None else cache
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="npu-migrate-verify-") as tmp:
        workdir = Path(tmp)
        runs = _References(options, cache, workdir)
        reference = runs.get("reference", [])
        if reference.get("error"):
            return ScriptOutcome("error", _error_line("the original script failed on the reference side",
                                                      reference["error"], options.original))
        target = run_side(_job(options, "target", options.migrated, workdir / "target.pt"), options, workdir)
        noise = None
        if options.noise_run:
            # the original under the device precision the migrated run had (all of it on a device)
            classes = target.get("hf32_used")
            classes = ["conv", "matmul"] if classes is None else classes
            # (always run: even with nothing in HF32, a device's kernels round differently, and
            # what that becomes after an optimizer step is what the noise run measures)
            noise = runs.get("noise", classes)
    outcome = judge(options, reference, noise, target)
    outcome.data["reference_store"] = runs.report()
    outcome.data["wall_s"] = round(time.perf_counter() - started, 3)
    return outcome


class _References:
    """The reference and noise runs of one original: from the in-memory cache, the reference store,
    or run now (and then kept in both)."""

    def __init__(self, options: ScriptOptions, cache: dict[tuple, dict[str, Any]], workdir: Path) -> None:
        from .store import ReferenceStore

        self.options, self.cache, self.workdir = options, cache, workdir
        self.base = (str(Path(options.original).resolve()), options.script, tuple(options.args), options.steps,
                     options.seed, options.reference, options.portable, options.memory, options.api_level)
        self.store = ReferenceStore(options.reference_store) if options.reference_store else None
        self.key = ReferenceStore.settings_key({"script": options.script, "args": options.args,
                                                "steps": options.steps, "seed": options.seed,
                                                "reference": options.reference, "portable": options.portable,
                                                "memory": options.memory, "api_level": options.api_level}) \
            if self.store else ""
        self.entry: Path | None = None
        self.reused: list[str] = []

    def get(self, side: str, classes: list[str]) -> dict[str, Any]:
        variant = (tuple(classes), self.options.fp16_accumulation) if side == "noise" else ()
        key = (side, *variant, *self.base)
        if key in self.cache:
            return self.cache[key]
        name = f"{side}.pt" if side == "reference" else \
            f"noise-{'-'.join(classes) or 'none'}{'-fp16acc' if self.options.fp16_accumulation else ''}.pt"
        original = Path(self.options.original).resolve()
        if self.store is not None and self.entry is None:
            self.entry = self.store.find(self.key, original)
        result = self.store.load(self.entry / name) if self.store is not None and self.entry is not None else None
        if result is not None:
            self.reused.append(side)
        else:
            before = self.store.snapshot(original) if self.store is not None else {}
            job = _job(self.options, side, self.options.original, self.workdir / name)
            result = run_side(dict(job, hf32=classes) if side == "noise" else job, self.options, self.workdir)
            if self.store is not None and not result.get("error"):
                written = self.store.written(original, before)
                if self.entry is None:
                    self.entry = self.store.create(self.key, original, written)
                else:
                    self.store.add_written(self.entry, written)
                self.store.save(self.entry / name, result)
        self.cache[key] = result
        return result

    def report(self) -> dict[str, Any] | None:
        if self.store is None:
            return None
        return {"entry": str(self.entry) if self.entry else None, "reused": self.reused}


def judge(options: ScriptOptions, reference: dict[str, Any], noise: dict[str, Any] | None,
          target: dict[str, Any]) -> ScriptOutcome:
    if target.get("error", {}) and target["error"].get("phase") == "setup":
        return ScriptOutcome("error", f"migrated side: {target['error']['message']}")
    noise_events = noise["record"] if noise and not noise.get("error") else None
    amp = bool(noise_events is not None and noise is not None and noise.get("amp_used"))
    if amp and noise_events is not None:
        # AMP: the float32 reference and the device's autocast differ in dtype op by op; the
        # migrated run is compared with the original under the device's autocast lists (the noise
        # run), and the tolerance is that run's distance from float32
        comparison = compare_records(noise_events, target.get("record", []), reference["record"],
                                     options.noise_factor, rounding=coarsest_dtype(noise_events))
    else:
        comparison = compare_records(reference["record"], target.get("record", []), noise_events,
                                     options.noise_factor)
    data = {"migrated_root": str(options.migrated), "original_root": str(options.original),
            "reference": reference.get("backend"),
            "noise": noise.get("backend") if noise else "none (per-op-class tolerances)",
            "target": target.get("backend"), "steps": options.steps, "amp": amp,
            "steps_run": target.get("steps_run")}
    if str(target.get("backend", "")).startswith("emulation"):
        data["scope"] = EMULATION_SCOPE
    if reference.get("tf32_refused"):
        first = reference["tf32_refused"][0]
        data["tf32"] = (f"the original asks for TF32 ({first['setting']} = {first['value']} at {first['site']}); "
                        "the reference computed in float32 regardless")
    if options.dump is not None:
        msprobe.write_dump(Path(options.dump) / "reference", reference["record"], str(options.original))
        msprobe.write_dump(Path(options.dump) / "migrated", target.get("record", []), str(options.migrated))
    truth, spread = (noise, reference) if amp and noise is not None else (reference, noise)
    _first_cause(comparison, truth, spread, target, options)
    data["memory"] = peak_memory(options, reference, target)
    records = {"reference": reference["record"], "migrated": target.get("record", [])}
    outcome = _verdict(reference, target, comparison, data)
    outcome.records = records
    return outcome


def _first_cause(comparison: Comparison, truth: dict[str, Any], spread: dict[str, Any] | None,
                 target: dict[str, Any], options: ScriptOptions) -> None:
    """Put the earliest divergence first, counting mode changes, autocast regions, saved objects and
    the final state (statecompare) beside the ops: a cause before the ops it affects wins."""
    from .opcompare import seq_mapper
    from .statecompare import mode_divergence, region_divergence, save_divergence, state_divergence

    ref_events, tgt_events = truth["record"], target.get("record", [])
    noise_events = spread["record"] if spread and not spread.get("error") else None
    to_migrated_seq, end = seq_mapper(ref_events, tgt_events)
    end = end if target.get("error") else float("inf")
    map_site = site_mapper(options.original, options.migrated)
    found = [comparison.first,
             mode_divergence(ref_events, tgt_events, to_migrated_seq, end, map_site),
             region_divergence(ref_events, tgt_events, to_migrated_seq, end, map_site)]
    if not target.get("error"):  # a run that raised ends where it raised: its saves and state are partial
        found += [save_divergence(ref_events, tgt_events, noise_events, options.noise_factor),
                  state_divergence(ref_events, tgt_events, noise_events, options.noise_factor)]
    candidates = [d for d in found if d is not None]
    if not candidates:
        return
    first = min(candidates, key=lambda d: d.seq)
    if first.site is None and first.reference_site:
        first.site = map_line(Path(options.original), Path(options.migrated), first.reference_site)
    comparison.first = first


def peak_memory(options: ScriptOptions, reference: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """Both sides' peaks, their ratio, the budgets broken and, when one is, the line to blame: a
    hook only the migrated code registers, else the line whose live bytes at the peak grew most."""
    from .sizes import format_bytes
    from .statecompare import new_hooks

    ref, tgt = reference.get("memory"), target.get("memory")
    if not options.memory or not ref or not tgt:
        return {"measured": False}
    ratio = tgt["peak"] / ref["peak"] if ref["peak"] else None
    out: dict[str, Any] = {"measured": True, "reference_peak": ref["peak"], "migrated_peak": tgt["peak"],
                           "ratio": ratio, "method": tgt.get("method"), "failures": []}
    out["text"] = (f"reference {format_bytes(ref['peak'])}, migrated {format_bytes(tgt['peak'])}"
                   + (f" (ratio {ratio:.3f})" if ratio is not None else ""))
    if options.max_peak is not None and tgt["peak"] > options.max_peak:
        out["failures"].append(f"peak memory {format_bytes(tgt['peak'])} > --max-peak {format_bytes(options.max_peak)}")
    if options.max_peak_ratio is not None and ratio is not None and ratio > options.max_peak_ratio:
        out["failures"].append(f"peak memory ratio {ratio:.3f} > --max-peak-ratio {options.max_peak_ratio:g}")
    if out["failures"]:
        hooks = new_hooks(reference["record"], target.get("record", []))
        if hooks:
            out["blame"] = hooks[0]["site"]
            out["blame_text"] = f" (the migrated code registers a {hooks[0]['name']} here that the original does not)"
        else:
            out.update(_grew_most(options, ref.get("by_site", {}), tgt.get("by_site", {})))
    return out


def _grew_most(options: ScriptOptions, ref_sites: dict[str, int], tgt_sites: dict[str, int]) -> dict[str, Any]:
    """The migrated line whose tensors alive at the peak grew most from the original's same line."""
    from .sizes import format_bytes

    mapped: dict[str, int] = {}
    for site, size in ref_sites.items():
        where = map_line(Path(options.original), Path(options.migrated), site) if ":" in site else site
        mapped[where or site] = mapped.get(where or site, 0) + size
    growth = {site: size - mapped.get(site, 0) for site, size in tgt_sites.items()}
    if not growth:
        return {}
    site, grown = max(growth.items(), key=lambda item: item[1])
    if grown <= 0 or ":" not in site:
        return {}
    return {"blame": site, "blame_text": f" (grew most: tensors made at {site}, +{format_bytes(grown)} alive at the peak)"}


def _verdict(reference: dict[str, Any], target: dict[str, Any], comparison: Comparison,
             data: dict[str, Any]) -> ScriptOutcome:
    if comparison.first is not None:
        for op in comparison.first.missing_ops:
            op["mapped_site"] = map_line(data["original_root"], data["migrated_root"], op.get("site"))
    error = target.get("error")
    if error and _is_placement(error):
        error["missing_moves"] = missing_moves(reference["record"], target.get("record", []),
                                               data["original_root"], data["migrated_root"])
        if error["missing_moves"]:
            move = error["missing_moves"][0]
            error["message"] += (f"; the original moves a tensor {move['shape']} to the device at {move['site']}, "
                                 f"the migrated code does not (migrated {move['mapped_site']})")
    elif error and comparison.first is None:
        missing = missing_before_error(reference["record"], target.get("record", []))
        if missing:
            # the innermost of its lines that the migration changed (the call it dropped), else its own
            changed = [site for site in missing["stack"]
                       if not line_unchanged(data["original_root"], data["migrated_root"], site)]
            missing["site"] = (changed or [missing["site"]])[0]
            missing["mapped_site"] = map_line(data["original_root"], data["migrated_root"], missing["site"])
            if missing["mapped_site"]:
                error["missing_before"] = missing
                error["message"] += (f"; just before it the original runs {missing['name']} at {missing['site']}, "
                                     f"the migrated code does not (migrated {missing['mapped_site']})")
    if target.get("timed_out"):
        return ScriptOutcome("error", (error or {}).get("message", "the migrated run timed out"),
                             comparison, error, data)
    if comparison.first is not None:
        reason = f"first divergence at {comparison.first.site or '?'}: {comparison.first.reason}"
        return ScriptOutcome("fail", reason, comparison, error, data)
    if error:
        where = f"{error['location']}: " if error.get("location") else ""
        return ScriptOutcome("fail", f"{where}the migrated script raised {error['type']}: {error['message']}",
                             comparison, error, data)
    moves = missing_moves(reference["record"], target.get("record", []), data["original_root"],
                          data["migrated_root"], limit=1)
    if moves:
        # a tensor left on the host that no op met with device tensors in the steps run (a mask a
        # layer drops as causal in training, then uses at evaluation): a device raises later
        move = data["missing_move"] = moves[0]
        return ScriptOutcome("fail", f"{move['mapped_site']}: the original moves a tensor {move['shape']} to the "
                                     f"device at {move['site']}, the migrated code does not: it stays on the host "
                                     "(no op met it with device tensors in the steps run; a device raises where "
                                     "one does)", comparison, None, data)
    if reference.get("steps_run", 0) != target.get("steps_run", 0):
        return ScriptOutcome("fail", f"the migrated script ran {target.get('steps_run')} steps, the original "
                                     f"{reference.get('steps_run')}", comparison, None, data)
    failures = (data.get("memory") or {}).get("failures")
    if failures:
        blame = data["memory"].get("blame")
        return ScriptOutcome("fail", f"{blame + ': ' if blame else ''}{'; '.join(failures)}"
                                     f"{data['memory'].get('blame_text', '')}", comparison, None, data)
    return ScriptOutcome("pass", f"{comparison.matched} ops and {target.get('steps_run')} losses match "
                                 f"within the measured noise", comparison, None, data)


def missing_before_error(reference: list[dict[str, Any]], migrated: list[dict[str, Any]]) -> dict[str, Any] | None:
    """When the migrated run raised: the last ops the original runs that the migrated code did not,
    before the point where the migrated run stopped (its first op, with the original's line)."""
    from .opcompare import _aligned, _ops

    ref_ops, tgt_ops = _ops(reference), _ops(migrated)
    if not tgt_ops:
        return None
    last = None
    for tag, i1, _, j1, _ in _aligned(ref_ops, tgt_ops):
        if j1 >= len(tgt_ops):
            break
        if tag == "delete":
            last = ref_ops[i1]
    if last is None or not last.get("site"):
        return None
    return {"name": last["name"], "site": last["site"], "stack": last.get("stack") or [last["site"]]}


def _is_placement(error: dict[str, Any]) -> bool:
    message = error.get("message", "")
    return "placement audit" in message or "same device" in message


def missing_moves(reference: list[dict[str, Any]], migrated: list[dict[str, Any]], original_root: str,
                  migrated_root: str, limit: int = 3) -> list[dict[str, Any]]:
    """The original's device moves (`.to(device)`, `.cuda()`) that the migrated code does not make
    at the same place (the line mapped into the migrated tree, the same shape), in the original's
    order: where a tensor was left on the CPU. The first is the earliest; the migrated run stops at
    its placement error, so the moves the original makes after that point are left out by `limit`."""
    from collections import Counter

    made = Counter((event["site"], tuple(event.get("shape") or ())) for event in migrated if event["kind"] == "move")
    mapped_sites: dict[str, str | None] = {}
    found = []
    for event in reference:
        if event["kind"] != "move":
            continue
        site = event["site"]
        if site not in mapped_sites:
            mapped_sites[site] = map_line(Path(original_root), Path(migrated_root), site)
        key = (mapped_sites[site], tuple(event.get("shape") or ()))
        if made[key] > 0:
            made[key] -= 1
        elif key[0]:
            found.append({"site": site, "mapped_site": key[0], "shape": event.get("shape")})
            if len(found) >= limit:
                break
    return found


def _error_line(prefix: str, error: dict[str, Any], root: Path) -> str:
    where = f"{Path(root) / error['location']}: " if error.get("location") else f"{root}: "
    return f"{where}{prefix}: {error['type']}: {error['message']}"

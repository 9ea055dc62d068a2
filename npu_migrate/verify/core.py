"""Runs both sides in subprocesses and turns their records into a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analysis import Outcome, analyze, error_outcome
from .entry import EntryError, split_entry
from .thresholds import ThresholdPolicy


@dataclass
class VerifyOptions:
    original: Path
    migrated: Path
    entry: str
    steps: int = 1
    seed: int = 0
    reference: str = "cpu"  # "cpu" or "cuda"
    backing: str = "cpu"  # what the emulation runs the npu side on, when there is no device
    memory: bool = True
    max_peak: int | None = None
    max_peak_ratio: float | None = None
    thresholds: ThresholdPolicy = field(default_factory=ThresholdPolicy.load)
    timeout: float = 600.0
    env: dict[str, str] | None = None  # extra environment for both sides (tests: a fake torch_npu)
    share_state: bool = False  # load the reference's initial state_dict and batch into the migrated side
    renames: dict[str, str] = field(default_factory=dict)  # reference name -> migrated name


def _check(options: VerifyOptions) -> None:
    rel_path, _ = split_entry(options.entry)
    for label, root in (("--original", options.original), ("--migrated", options.migrated)):
        if not Path(root).is_dir():
            raise EntryError(f"{root}: {label} is not a directory")
        if not (Path(root) / rel_path).is_file():
            raise EntryError(f"{Path(root) / rel_path}: entry file not found ({label} tree)")
    if options.steps < 1:
        raise EntryError(f"--steps {options.steps}: must be at least 1")


class SideTimeout(str):
    """The stderr stand-in of a side that ran out of time (reported as a timeout, not a crash)."""


def _run_side(side: str, jobs: list[dict[str, Any]], options: VerifyOptions, workdir: Path) -> str:
    """Run one side's jobs in a fresh interpreter; returns its stderr (for error messages)."""
    job_file = workdir / f"{side}.json"
    job_file.write_text(json.dumps({"side": side, "reference": options.reference,
                                    "backing": options.backing, "jobs": jobs}))
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), package_parent) if p)
    env.update(options.env or {})
    try:
        proc = subprocess.run([sys.executable, "-m", "npu_migrate.verify.runner", str(job_file)],
                              capture_output=True, text=True, env=env, timeout=options.timeout, check=False)
    except subprocess.TimeoutExpired:
        return SideTimeout(f"the {'original' if side == 'reference' else 'migrated'} side timed out after "
                           f"{options.timeout:g} s (raise --timeout or lower --steps)")
    return proc.stderr


def _load(path: str) -> dict[str, Any] | None:
    import torch

    if not Path(path).is_file():
        return None
    return torch.load(path, weights_only=False)


def verify_many(cases: list[VerifyOptions]) -> list[Outcome]:
    """Verify several (original, migrated) pairs with one process per side; cases that share an
    original tree and entry share its reference run. All cases must use the same device settings."""
    if not cases:
        return []
    first = cases[0]
    if any((c.reference, c.backing, c.env) != (first.reference, first.backing, first.env) for c in cases):
        raise ValueError("verify_many: all cases must share reference, backing and env")
    outcomes: list[Outcome | None] = [None] * len(cases)
    valid = []
    for i, case in enumerate(cases):
        try:
            _check(case)
            valid.append(i)
        except EntryError as error:
            outcomes[i] = error_outcome(str(error))
    with tempfile.TemporaryDirectory(prefix="npu-migrate-verify-") as tmp:
        workdir = Path(tmp)
        ref_jobs: dict[tuple, dict[str, Any]] = {}
        ref_of: dict[int, dict[str, Any]] = {}
        for i in valid:
            c = cases[i]
            key = (str(Path(c.original).resolve()), c.entry, c.steps, c.seed)
            if key not in ref_jobs:
                ref_jobs[key] = {"root": key[0], "entry": c.entry, "steps": c.steps, "seed": c.seed,
                                 "memory": False, "out": str(workdir / f"ref{len(ref_jobs)}.pt")}
            ref_jobs[key]["memory"] |= c.memory  # measured once if any case sharing it wants it
            ref_of[i] = ref_jobs[key]
        t0 = time.perf_counter()
        ref_stderr = _run_side("reference", list(ref_jobs.values()), first, workdir) if ref_jobs else ""
        ref_time = time.perf_counter() - t0
        references = {job["out"]: _load(job["out"]) for job in ref_jobs.values()}
        target_jobs: list[dict[str, Any]] = []
        target_of: dict[int, dict[str, Any]] = {}
        for i in valid:
            ref = references[ref_of[i]["out"]]
            if ref is None:
                outcomes[i] = error_outcome(_lost_side("reference", ref_stderr))
                continue
            if ref.get("error"):
                outcomes[i] = error_outcome(_error_text("the original code failed on the reference side",
                                                        ref["error"], cases[i].original))
                continue
            c = cases[i]
            job = {"root": str(Path(c.migrated).resolve()), "entry": c.entry, "steps": c.steps,
                   "seed": c.seed, "memory": c.memory, "init": ref_of[i]["out"] if c.share_state else None,
                   "renames": c.renames, "out": str(workdir / f"target{i}.pt")}
            target_jobs.append(job)
            target_of[i] = job
        t0 = time.perf_counter()
        tgt_stderr = _run_side("target", target_jobs, first, workdir) if target_jobs else ""
        tgt_time = time.perf_counter() - t0
        for i, job in target_of.items():
            target = _load(job["out"])
            if target is None:
                outcomes[i] = error_outcome(_lost_side("target", tgt_stderr))
                continue
            if target.get("error", {}) and target["error"].get("phase") == "setup":
                outcomes[i] = error_outcome(f"migrated side: {target['error']['message']}")
                continue
            if target.get("error", {}) and target["error"].get("type") == "EntryError":
                outcomes[i] = error_outcome(_error_text("the migrated code does not follow the entry protocol",
                                                        target["error"], cases[i].migrated))
                continue
            reference = references[ref_of[i]["out"]]
            assert reference is not None  # a case whose reference is missing got no target job
            outcome = analyze(reference, target, cases[i])
            outcome.data["wall_s"] = {"reference_process": round(ref_time, 3),
                                      "target_process": round(tgt_time, 3)}
            outcomes[i] = outcome
    return [o for o in outcomes if o is not None]


def verify(options: VerifyOptions) -> Outcome:
    return verify_many([options])[0]


def _lost_side(side: str, stderr: str) -> str:
    if isinstance(stderr, SideTimeout):
        return str(stderr)
    label = "original" if side == "reference" else "migrated"
    return f"the {label} side crashed (its process died): {_tail(stderr)}"


def _tail(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _error_text(prefix: str, error: dict[str, Any], root: Path) -> str:
    where = f"{Path(root) / error['location']}: " if error.get("location") else f"{Path(root) / error['file']}: " \
        if error.get("file") else f"{root}: "
    return f"{where}{prefix} ({error['phase']}): {error['type']}: {error['message']}"

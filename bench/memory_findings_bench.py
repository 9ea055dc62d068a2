"""Can the memory findings be trusted? Leak precision/recall and peak error (issue 16).

    python bench/memory_findings_bench.py [--snapshots /work/shared/snapshots]

Inputs:
* the real snapshots in --snapshots (per device), each labelled with the leak a person finds
  in it (LABELS below, with the reason);
* generated leak/no-leak pairs (npu_migrate/memory/scenarios.py): single passes of 32- and
  48-layer models (forward+backward+optimizer, forward+backward, forward only, torch_npu
  shape), 12-step training runs whose step evidence is the optimizer's frames or
  ProfilerStep annotations (also behind the emulation layer, also torch_npu-shaped), and
  inference loops with no step evidence at all (a 4.4 GiB linear leak, no leak, a leak behind
  the emulation layer);
* 40 seeded random runs (random_cases: depth 4-64, 1-80 iterations, widths, leak sizes from
  64 KiB to 8 MiB or none, each kind of evidence, with or without times and the emulation layer);
* peak checks: every input above, a trace that starts with the frees of 512 MiB (true peak
  before its first event), and ring-buffer cuts of a training run at 5 points.

Prints per input the verdict, then: leak precision and recall, false leaks on single passes,
planted leaks found at the right user line, the largest peak error against the independent
dict-based oracle (tests/memory/reference.py) and against the known true peak.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "memory")]

from reference import load_raw
from reference import replay as reference_replay

from npu_migrate.memory.loader import load_snapshot, normalise
from npu_migrate.memory.report import analyze
from npu_migrate.memory.scenarios import (
    cases,
    deep_model,
    random_cases,
    starts_with_frees,
)
from npu_migrate.memory.synthetic import truncate

# (file name, device) -> expected leak site, or None; and why a person says so
LABELS = {
    ("snapshot_1768383987920985470.pkl", 0): (None, "allocated at step starts is flat"),
    ("snapshot_expandable.pkl", 0): ("memory_leaks_demo.py:12 (train_one_step)",
                                     "+40 MiB per step, 40 MiB blocks from line 12 never freed"),
    ("snapshot_with_empty_cache.pkl", 0): ("memory_leaks_demo.py:11 (train_one_step)",
                                           "+40 MiB per step from line 11"),
    ("snapshot_with_empty_cache_expandable.pkl", 0): (
        "memory_leaks_demo.py:11 (train_one_step)", "+40 MiB per step from line 11"),
    ("snapshot_with_multi_devices.pkl", 0): ("memory_leaks_demo.py:11 (train_one_step)",
                                             "device 0 is the empty_cache leak demo"),
    ("snapshot_with_multi_devices.pkl", 1): (None, "device 1 is the flat demo"),
    ("small_training_step.pickle", 0): (None, "one training step (single pass)"),
    ("multi_gpu_expandable_oom.pickle", 0): (None, "one training step (single pass)"),
    ("multi_gpu_expandable_oom.pickle", 1): (None, "one forward pass ending in an OOM"),
    ("multi_gpu_expandable_oom.pickle", 2): (None, "one forward pass (activations kept)"),
}
SINGLE_PASS_REAL = {"small_training_step.pickle", "multi_gpu_expandable_oom.pickle"}


class Score:
    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0
        self.single_false = self.single_cases = 0
        self.planted = self.planted_right = 0
        self.worst_oracle = self.worst_true = 0.0

    def leak(self, name: str, expected: str | None, found: list[str], single: bool) -> str:
        right = expected is not None and expected in found
        self.tp += int(right)
        self.fn += int(expected is not None and not right)
        wrong = [s for s in found if s != expected]
        self.fp += len(wrong)
        if single:
            self.single_cases += 1
            self.single_false += len(found)
        if expected is not None:
            self.planted += 1
            self.planted_right += int(right)
        return "ok" if right or (expected is None and not found) else f"WRONG {found}"

    def peak(self, ours: int, oracle: int, true: int | None = None) -> float:
        error = abs(ours - oracle) / max(oracle, 1)
        self.worst_oracle = max(self.worst_oracle, error)
        if true is not None:
            self.worst_true = max(self.worst_true, abs(ours - true) / max(true, 1))
        return error


def sites(report, device: int) -> list[str]:
    return [f.message.split("possible leak at ", 1)[1].split(": ", 1)[0]
            for f in report.findings if f.code == "MEM001"
            and f.message.startswith(f"device {device}:")]


def real(folder: Path, score: Score) -> int:
    files = sorted(p for p in folder.glob("*/*") if p.suffix in (".pkl", ".pickle"))
    for path in files:
        start = time.perf_counter()
        snapshot = load_snapshot(path)
        report, contexts = analyze(snapshot)
        raw = load_raw(path)
        for ctx in contexts:
            expected, why = LABELS.get((path.name, ctx.device), (None, "unlabelled"))
            ref = reference_replay(raw, ctx.device)
            error = score.peak(ctx.rep.peak_bytes, ref["peak"])
            verdict = score.leak(path.name, expected, sites(report, ctx.device),
                                 path.name in SINGLE_PASS_REAL)
            print(f"real  {path.name:42s} dev {ctx.device}  steps {len(ctx.steps):3d}  "
                  f"leak {verdict:5s} ({why})  peak err {error:.2e}  "
                  f"{time.perf_counter() - start:.2f} s")
    return len(files)


def generated(score: Score) -> int:
    made = cases() + random_cases()
    for name, data in made:
        facts = data.pop("_facts")
        report, (ctx,) = analyze(normalise(data, name))
        ref = reference_replay(data, 0)
        error = score.peak(ctx.rep.peak_bytes, ref["peak"])
        verdict = score.leak(name, facts["leak_site"], sites(report, 0), facts["single_pass"])
        print(f"gen   {name:60s} steps {len(ctx.steps):3d}  leak {verdict:5s}  "
              f"peak err {error:.2e}")
    return len(made)


def peaks(score: Score) -> int:
    cut, true_peak = starts_with_frees()
    cut.pop("_facts")
    _, (ctx,) = analyze(normalise(cut, "cut"))
    error = score.peak(ctx.rep.peak_bytes, reference_replay(cut, 0)["peak"], true_peak)
    print(f"peak  trace starting with the frees of 512 MiB: ours {ctx.rep.peak_bytes} true "
          f"{true_peak} err {error:.2e}")
    full = deep_model(16, 10)
    full.pop("_facts")
    n = len(full["device_traces"][0])
    for keep in (n // 10, n // 4, n // 2, 3 * n // 4, n - 7):
        data = truncate(full, keep)
        _, (ctx,) = analyze(normalise(data, "cut"))
        error = score.peak(ctx.rep.peak_bytes, reference_replay(data, 0)["peak"])
        print(f"peak  training run cut to its last {keep} of {n} events: err {error:.2e}")
    return 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=Path, default=ROOT.parent / "shared" / "snapshots")
    args = parser.parse_args()
    score = Score()
    n_real = real(args.snapshots, score) if args.snapshots.is_dir() else 0
    n_gen = generated(score)
    n_peak = peaks(score)
    precision = score.tp / max(score.tp + score.fp, 1)
    recall = score.tp / max(score.tp + score.fn, 1)
    print()
    print(f"inputs: {n_real} real snapshots, {n_gen} generated cases, {n_peak} peak cases")
    print(f"leak precision {precision:.3f}  recall {recall:.3f}  "
          f"(tp {score.tp}, fp {score.fp}, fn {score.fn})")
    print(f"false leaks on single passes: {score.single_false} over {score.single_cases} "
          "single-pass inputs")
    print(f"planted/labelled leaks found at the right user line: {score.planted_right}/"
          f"{score.planted}")
    print(f"largest peak error: {100 * score.worst_oracle:.4f}% against the oracle, "
          f"{100 * score.worst_true:.4f}% against the known true peak")


if __name__ == "__main__":
    main()

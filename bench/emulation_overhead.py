"""Cost of the emulated npu device against the previous emulation (CPU tensors in disguise) and
plain CPU torch, on the verifier's bench models, in the same run.

    python bench/emulation_overhead.py [--baseline-rev REV] [--repeats 3] [--steps 5]

- fixtures: the `train.py:build` models of fixtures/verify (mlp, cnn, transformer, amp_mlp): the
  migrated build under `activate()` (the CLI's settings, memory statistics on), `steps` training
  steps timed after one warm-up step, in a child process each; "plain" is the original build on
  plain CPU torch with the same steps.
- scripts: the bench/verify_models scripts (mnist, word_language_model LSTM and Transformer,
  nanoGPT) migrated by `apply`'s engine and run whole under `python -m npu_migrate.emulation`
  (process wall time, torch's import included), with the arguments bench/verify_faults.py uses.

The previous emulation is `npu_migrate/` of `--baseline-rev` (default: main), exported with
`git archive` into a temporary folder that goes first on PYTHONPATH. Printed: medians over
`repeats` and the ratio new / previous. Children run with OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_paths import ROOT

from verify_faults import SCRIPTS, migrate  # the scripts and arguments of the verifier's fault bench

FIXTURES = ROOT / "fixtures" / "verify"

STEPS = r"""
import sys, time
side, root, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
import torch
from pathlib import Path
if side == "plain":
    device = "cpu"
    from npu_migrate.verify.runner import _install_cuda_shim
    _install_cuda_shim()
else:
    from npu_migrate import emulation
    emulation.activate()
    device = "npu"
from npu_migrate.verify.entry import call_build, compute_loss, load_build, run_forward
sys.path.insert(0, root)
spec = call_build(load_build(Path(root), "train.py:build"), device)
optimizer = spec.optimizer or torch.optim.SGD(spec.model.parameters(), lr=0.01)
def step():
    optimizer.zero_grad(set_to_none=True)
    compute_loss(spec, run_forward(spec)).backward()
    optimizer.step()
step()
start = time.perf_counter()
for _ in range(steps):
    step()
print(time.perf_counter() - start)
"""


def export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "npu_migrate", "codemods"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(cmd: list[str], pythonpath: Path, cwd: Path) -> tuple[float, str]:
    # one intra-op thread: on a busy 2-core machine OpenMP's spinning threads made plain CPU steps
    # 100x slower than with one thread (and the numbers meaningless); one thread is stable
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "OMP_NUM_THREADS": "1"}
    check = subprocess.run([sys.executable, "-c", "import npu_migrate; print(npu_migrate.__file__)"], cwd=cwd,
                           env=env, capture_output=True, text=True, check=True).stdout
    if not check.startswith(str(pythonpath)):
        raise SystemExit(f"npu_migrate resolves to {check.strip()}, not under {pythonpath}")
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])}... (PYTHONPATH={pythonpath}): exit {proc.returncode}\n"
                         f"{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-rev", default="main")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        previous = export(args.baseline_rev, work / "previous")
        sides = {"previous": previous, "new": ROOT}
        print(f"baseline {args.baseline_rev}, repeats {args.repeats}, python {sys.version.split()[0]}")
        print(f"{'fixture (s per step)':<22} {'plain':>8} {'previous':>9} {'new':>8} {'new/prev':>9} {'new/plain':>10}")
        for model in ("mlp", "cnn", "transformer", "amp_mlp"):
            times: dict[str, list[float]] = {"plain": [], "previous": [], "new": []}
            for _ in range(args.repeats):
                original, migrated = FIXTURES / "original" / model, FIXTURES / "migrated" / model
                # run from the temporary folder: the working directory comes first on sys.path
                times["plain"].append(float(run([sys.executable, "-c", STEPS, "plain", str(original),
                                                 str(args.steps)], ROOT, work)[1]))
                for side, path in sides.items():
                    times[side].append(float(run([sys.executable, "-c", STEPS, "npu", str(migrated),
                                                  str(args.steps)], path, work)[1]))
            med = {k: statistics.median(v) / args.steps for k, v in times.items()}
            print(f"{model:<22} {med['plain']:8.4f} {med['previous']:9.4f} {med['new']:8.4f} "
                  f"{med['new'] / med['previous']:9.2f} {med['new'] / med['plain']:10.2f}")
        print(f"{'script (s per run)':<22} {'':>8} {'previous':>9} {'new':>8} {'new/prev':>9}")
        for model, (folder, script, script_args) in SCRIPTS.items():
            tree = migrate(ROOT / "bench" / "verify_models" / folder, work / f"migrated_{model}")
            times = {"previous": [], "new": []}
            for _ in range(args.repeats):
                for side, path in sides.items():
                    times[side].append(run([sys.executable, "-m", "npu_migrate.emulation", script, *script_args],
                                           path, tree)[0])
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{model:<22} {'':>8} {med['previous']:9.2f} {med['new']:8.2f} {med['new'] / med['previous']:9.2f}")


if __name__ == "__main__":
    main()

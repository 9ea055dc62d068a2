"""Verification overhead: wall time of `verify` against a plain run of the same steps on both sides.

    python bench/verify_bench.py [--steps 5] [--repeats 3] [--models mlp,cnn,transformer,amp_mlp]

For each fixture pair under fixtures/verify, it times
- plain: one process runs the original's steps on CPU, one runs the migrated steps under the
  emulation (no hooks, no profiler, no comparison), each started like the verifier starts a side;
- verify: `npu-migrate verify` on the same pair (both sides, peak memory, hooks, comparison).
It prints the medians of wall time and of CPU time (user + system of the child processes, which a
loaded machine inflates much less) and the ratios verify / plain.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "verify"

PLAIN = r"""
import sys, time
side, root, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
import torch
from pathlib import Path
if side == "migrated":
    from npu_migrate import emulation
    emulation.activate(track_memory=False)
    device = "npu"
else:
    from npu_migrate.verify.runner import _install_cuda_shim
    _install_cuda_shim()
    device = "cpu"
from npu_migrate.verify.entry import call_build, compute_loss, load_build, run_forward
sys.path.insert(0, root)
spec = call_build(load_build(Path(root), "train.py:build"), device)
optimizer = spec.optimizer or torch.optim.SGD(spec.model.parameters(), lr=0.01)
for _ in range(steps):
    optimizer.zero_grad(set_to_none=True)
    compute_loss(spec, run_forward(spec)).backward()
    optimizer.step()
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a child process; CPU time is robust to a loaded machine."""
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}...: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return elapsed, _children_cpu() - cpu


def _add(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] + b[0], a[1] + b[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="mlp,cnn,transformer,amp_mlp")
    args = parser.parse_args()
    print(f"steps={args.steps} repeats={args.repeats} python={sys.version.split()[0]}")
    print(f"{'model':<12} {'plain s':>8} {'verify s':>9} {'ratio':>6} {'plain cpu':>10} {'verify cpu':>11} {'ratio':>6}")
    for model in args.models.split(","):
        original, migrated = FIXTURES / "original" / model, FIXTURES / "migrated" / model
        plain, verify = [], []
        for _ in range(args.repeats):
            plain.append(_add(timed([sys.executable, "-c", PLAIN, "original", str(original), str(args.steps)]),
                              timed([sys.executable, "-c", PLAIN, "migrated", str(migrated), str(args.steps)])))
            verify.append(timed([sys.executable, "-m", "npu_migrate", "verify", "--original", str(original),
                                 "--migrated", str(migrated), "--entry", "train.py:build",
                                 "--steps", str(args.steps), "--format", "json"]))
        p, v = (statistics.median(x[0] for x in plain), statistics.median(x[0] for x in verify))
        pc, vc = (statistics.median(x[1] for x in plain), statistics.median(x[1] for x in verify))
        print(f"{model:<12} {p:8.2f} {v:9.2f} {v / p:6.2f} {pc:10.2f} {vc:11.2f} {vc / pc:6.2f}")


if __name__ == "__main__":
    main()

"""Cost of the emulated npu device against the previous emulation (CPU tensors in disguise) and
plain CPU torch, on the verifier's bench models, in the same run.

    python bench/emulation_overhead.py [--baseline-rev REV] [--repeats 3] [--steps 5] [--only mlp,cnn,script:gpt]

- fixtures: the `train.py:build` models of fixtures/verify (mlp, cnn, transformer, amp_mlp): the
  migrated build under `activate()` (the CLI's settings, memory statistics on), `steps` training
  steps timed after one warm-up step, in a child process each; "plain" is the original build on
  plain CPU torch with the same steps.
- scripts: the bench/verify_models scripts (mnist, word_language_model LSTM and Transformer,
  nanoGPT) migrated by `apply`'s engine and run whole under `python -m npu_migrate.emulation`
  (process wall time, torch's import included), with the arguments bench/verify_faults.py uses.

The previous emulation is `npu_migrate/` of `--baseline-rev` (default: main), exported with
`git archive` into a temporary folder that goes first on PYTHONPATH. Printed: medians over
`repeats` and the ratio new / previous, of wall time and of CPU time (user + system of the child, or
of the timed steps: on a machine shared with other work, CPU seconds move far less than wall
seconds). Children run with OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import os
import resource
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
start, cpu_start = time.perf_counter(), time.process_time()
for _ in range(steps):
    step()
print(time.perf_counter() - start, time.process_time() - cpu_start)
"""


def export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "npu_migrate", "codemods"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(cmd: list[str], pythonpath: Path, cwd: Path) -> tuple[float, float, str]:
    """Runs `cmd`; returns its wall seconds, its CPU seconds (user + system) and its output."""
    # one intra-op thread: on a busy 2-core machine OpenMP's spinning threads made plain CPU steps
    # 100x slower than with one thread (and the numbers meaningless); one thread is stable
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "OMP_NUM_THREADS": "1"}
    check = subprocess.run([sys.executable, "-c", "import npu_migrate; print(npu_migrate.__file__)"], cwd=cwd,
                           env=env, capture_output=True, text=True, check=True).stdout
    if not check.startswith(str(pythonpath)):
        raise SystemExit(f"npu_migrate resolves to {check.strip()}, not under {pythonpath}")
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    elapsed, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])}... (PYTHONPATH={pythonpath}): exit {proc.returncode}\n"
                         f"{proc.stderr[-3000:]}")
    return elapsed, cpu, proc.stdout


FIXTURE_MODELS = ("mlp", "cnn", "transformer", "amp_mlp")


def fixture_row(model: str, args: argparse.Namespace, sides: dict[str, Path], work: Path) -> str:
    """Seconds per step, wall and CPU, medians over the repeats, with the ratios."""
    wall: dict[str, list[float]] = {"plain": [], "previous": [], "new": []}
    cpu: dict[str, list[float]] = {"plain": [], "previous": [], "new": []}
    original, migrated = FIXTURES / "original" / model, FIXTURES / "migrated" / model
    for _ in range(args.repeats):
        # run from the temporary folder: the working directory comes first on sys.path
        runs = [("plain", original, ROOT)] + [(side, migrated, path) for side, path in sides.items()]
        for side, tree, pythonpath in runs:
            output = run([sys.executable, "-c", STEPS, "plain" if side == "plain" else "npu", str(tree),
                          str(args.steps)], pythonpath, work)[2]
            step_wall, step_cpu = (float(v) for v in output.split())
            wall[side].append(step_wall)
            cpu[side].append(step_cpu)
    w = {k: statistics.median(v) / args.steps for k, v in wall.items()}
    c = {k: statistics.median(v) / args.steps for k, v in cpu.items()}
    return (f"{model:<22} {w['plain']:8.4f} {w['previous']:9.4f} {w['new']:8.4f} {w['new'] / w['previous']:9.2f} "
            f"{w['new'] / w['plain']:10.2f} | {c['plain']:8.4f} {c['new']:8.4f} {c['new'] / c['previous']:9.2f} "
            f"{c['new'] / c['plain']:10.2f}")


def script_row(model: str, args: argparse.Namespace, sides: dict[str, Path], work: Path) -> str:
    folder, script, script_args = SCRIPTS[model]
    tree = migrate(ROOT / "bench" / "verify_models" / folder, work / f"migrated_{model}")
    wall: dict[str, list[float]] = {"previous": [], "new": []}
    cpu: dict[str, list[float]] = {"previous": [], "new": []}
    for _ in range(args.repeats):
        for side, path in sides.items():
            elapsed, used, _ = run([sys.executable, "-m", "npu_migrate.emulation", script, *script_args], path, tree)
            wall[side].append(elapsed)
            cpu[side].append(used)
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}
    return (f"{model:<22} {'':>8} {w['previous']:9.2f} {w['new']:8.2f} {w['new'] / w['previous']:9.2f} {'':>10} | "
            f"{c['previous']:8.2f} {c['new']:8.2f} {c['new'] / c['previous']:9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-rev", default="main")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    scripts = [f"script:{name}" for name in SCRIPTS]  # (a fixture and a script are both named "transformer")
    parser.add_argument("--only", default="", help=f"fixtures and scripts to run, e.g. mlp,cnn,script:gpt "
                                                   f"(all of {', '.join((*FIXTURE_MODELS, *scripts))} by default)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else {*FIXTURE_MODELS, *scripts}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        previous = export(args.baseline_rev, work / "previous")
        sides = {"previous": previous, "new": ROOT}
        print(f"baseline {args.baseline_rev}, repeats {args.repeats}, python {sys.version.split()[0]}")
        print(f"{'fixture (s per step)':<22} {'plain':>8} {'previous':>9} {'new':>8} {'new/prev':>9} {'new/plain':>10} | "
              f"{'cpu plain':>8} {'cpu new':>8} {'new/prev':>9} {'new/plain':>10}", flush=True)
        for model in FIXTURE_MODELS:
            if model in only:
                print(fixture_row(model, args, sides, work), flush=True)
        print(f"{'script (s per run)':<22} {'':>8} {'previous':>9} {'new':>8} {'new/prev':>9} {'':>10} | "
              f"{'cpu prev':>8} {'cpu new':>8} {'new/prev':>9}", flush=True)
        for model in SCRIPTS:
            if f"script:{model}" in only:
                print(script_row(model, args, sides, work), flush=True)


if __name__ == "__main__":
    main()

"""Issue 15's done-when on the training-script fixture, measured: `apply --target portable` on
tests/portable/cuda_train.py (CPU fallback, seeding, AMP, DataLoader, DDP guarded by world size),
then the original and the result on plain CPU torch and the result under the NPU emulation.

    python bench/portable_bench.py [--repeat 3]

Prints the CUDA/NPU spellings left (excluding comments), the losses and their differences, whether a
second apply changes anything, and the median wall time of each run (the original's run is the
baseline of the ratios)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "portable" / "cuda_train.py"
SPECIFIC = re.compile(r"\bcuda\b|\bnccl\b|\bnpu\b|\bhccl\b|torch_npu", re.I)


def run(*args: str, cwd: Path) -> tuple[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout + done.stderr, elapsed


def loss_of(output: str) -> tuple[str, float]:
    device = re.search(r"^device=(\w+)$", output, re.M)
    loss = re.search(r"^loss=([-\d.]+)$", output, re.M)
    assert device and loss, output
    return device.group(1), float(loss.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    folder = Path(tempfile.mkdtemp(prefix="portable-bench-"))
    original, migrated = folder / "original.py", folder / "train.py"
    shutil.copy(FIXTURE, original)
    shutil.copy(FIXTURE, migrated)
    apply = ("-m", "npu_migrate", "apply", "--target", "portable", "--no-cache", "--isolated")
    run(*apply, str(migrated), cwd=folder)
    code = "\n".join(line for line in migrated.read_text().split('"""', 2)[-1].splitlines()
                     if not line.lstrip().startswith("#"))
    left = SPECIFIC.findall(code)
    before = migrated.read_bytes()
    run(*apply, str(migrated), cwd=folder)
    stable = migrated.read_bytes() == before
    rows = {}
    for label, args in (("original, CPU", (str(original),)), ("portable, CPU", (str(migrated),)),
                        ("portable, emulated npu", ("-m", "npu_migrate.emulation", str(migrated)))):
        outputs = [run(*args, cwd=folder) for _ in range(repeat)]
        results = {loss_of(out) for out, _ in outputs}
        assert len(results) == 1, f"{label}: not deterministic: {results}"
        rows[label] = (results.pop(), statistics.median(t for _, t in outputs))
    print(f"CUDA/NPU spellings left after apply --target portable: {len(left)} {left}")
    print(f"second apply changes the file: {'no' if stable else 'YES'}")
    base_loss, base_time = rows["original, CPU"][0][1], rows["original, CPU"][1]
    print("| run | device | loss | |loss - original| | median wall (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for label, ((device, loss), wall) in rows.items():
        print(f"| {label} | {device} | {loss:.6f} | {abs(loss - base_loss):.6f} | {wall:.2f} | {wall / base_time:.2f}x |")
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()

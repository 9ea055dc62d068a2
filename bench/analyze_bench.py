"""Benchmark: `npu-migrate analyze` against `npu-migrate apply --check` on the same corpus, in one run.

The corpus is the Python sources of the installed torch wheel (about 2,300 files, 46 MB), copied
to a temporary folder (outside any git work tree, so discovery walks it the same way for both).
Each command runs as a subprocess, alternating, `--repeat` times; the medians of wall time and
of CPU time (the command plus its worker processes) and their ratios are printed (the issue's
budget: analyze <= 1.5 x apply --check). On a machine shared with other work the CPU ratio is
the steadier figure.

    python bench/analyze_bench.py [--repeat 3] [--jobs N] [--json bench/results/analyze.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def copy_corpus(destination: str) -> tuple[int, int]:
    import torch

    root = os.path.dirname(torch.__file__)
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                source = os.path.join(folder, name)
                target = os.path.join(destination, "torch", os.path.relpath(source, root))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(source, target)
                files += 1
                size += os.path.getsize(source)
    return files, size


def timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds (user + system of the command and its worker processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.decode()[-2000:]}")
    return elapsed, cpu, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "npu_migrate"]
    with tempfile.TemporaryDirectory(prefix="analyze-bench-") as corpus:
        files, size = copy_corpus(corpus)
        print(f"corpus: {files} Python files, {size / 1e6:.1f} MB, jobs={args.jobs}")
        report = os.path.join(corpus, "report.json")
        commands = {
            "apply --check": cli + ["apply", "--check", "--no-cache", "--quiet", "-j", str(args.jobs),
                                    os.path.join(corpus, "torch")],
            "analyze": cli + ["analyze", "-j", str(args.jobs), "--format", "json", "--output", report,
                              os.path.join(corpus, "torch")],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.repeat):
            for name, command in commands.items():
                elapsed, used, code = timed(command)
                times[name].append(elapsed)
                cpu[name].append(used)
                print(f"round {round_ + 1}: {name:14s} wall {elapsed:7.2f} s  cpu {used:7.2f} s (exit {code})",
                      flush=True)
        with open(report, encoding="utf-8") as handle:
            summary = json.load(handle)["summary"]
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    ratio = medians["analyze"] / medians["apply --check"]
    cpu_ratio = cpu_medians["analyze"] / cpu_medians["apply --check"]
    print(f"median wall: apply --check {medians['apply --check']:.2f} s, analyze {medians['analyze']:.2f} s, "
          f"ratio {ratio:.2f} (budget 1.50)")
    print(f"median CPU:  apply --check {cpu_medians['apply --check']:.2f} s, analyze {cpu_medians['analyze']:.2f} s, "
          f"ratio {cpu_ratio:.2f} (the steadier figure on a shared machine)")
    print(f"analyze summary: {summary}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"files": files, "bytes": size, "jobs": args.jobs, "times": times, "cpu": cpu,
                       "medians": medians, "ratio": ratio, "cpu_medians": cpu_medians, "cpu_ratio": cpu_ratio}, handle, indent=2)


if __name__ == "__main__":
    main()

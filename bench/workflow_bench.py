"""Workflow benchmark: the result cache and a pre-commit style run.

Corpus: the Python sources of the installed torch wheel (about 2,300 files), copied to a
temporary folder outside any git work tree. Every measurement is a whole `python -m npu_migrate`
subprocess, start-up included, as a user or a hook pays it.

1. cold: `apply --check .` with an empty cache folder (the baseline), `--cold-repeat` times, a
   fresh cache each time;
2. warm: the same command again with the cache filled and nothing changed, `--repeat` times
   (budget: < 2 s);
3. pre-commit style: `apply --diff` over 10 files of the corpus that were just edited (so none is
   in the cache), as pre-commit passes staged files (budget: < 2 s);
4. start-up: `python -m npu_migrate --version`, for reference.

    python bench/workflow_bench.py [--repeat 5] [--cold-repeat 1] [--jobs N] [--json bench/results/workflow.json]
    python bench/workflow_bench.py --limit 200 --repeat 1   # a quick smoke run

Prints medians, the cold/warm ratio and whether each budget holds; also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUDGET_S = 2.0
CUDA_HINT = re.compile(r"\.cuda\(|\.is_cuda\b|[\"']cuda[\"':]")


def copy_corpus(destination: str, limit: int | None = None) -> int:
    import torch

    root = os.path.dirname(torch.__file__)
    count = 0
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(".py") and (limit is None or count < limit):
                source = os.path.join(folder, name)
                target = os.path.join(destination, "torch", os.path.relpath(source, root))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(source, target)
                count += 1
    return count


def timed(args: list[str], cwd: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=cwd,
                            capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"npu-migrate {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed, result


def summary(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stdout)["summary"]


def changed_files(corpus: str, count: int) -> list[str]:
    """`count` files that a CUDA migration touches, spread over the tree (deterministic)."""
    found = []
    for folder, dirs, names in os.walk(corpus):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8", errors="replace") as handle:
                if CUDA_HINT.search(handle.read()):
                    found.append(os.path.relpath(path, corpus))
    step = max(1, len(found) // count)
    return found[::step][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs of the warm, pre-commit and start-up measurements (median)")
    parser.add_argument("--cold-repeat", type=int, default=1,
                        help="cold runs, each with a fresh cache (minutes each on 2 cores)")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--json", default=os.path.join("bench", "results", "workflow.json"))
    parser.add_argument("--limit", type=int, default=None, help="copy only this many files (smoke test)")
    options = parser.parse_args()
    jobs = ["--jobs", str(options.jobs)] if options.jobs else []
    work = tempfile.mkdtemp(prefix="npu-migrate-workflow-bench-")
    try:
        corpus = os.path.join(work, "corpus")
        files = copy_corpus(corpus, options.limit)
        cache = os.path.join(work, "cache")
        check = ["apply", "--check", "--format", "json", "--cache-dir", cache, *jobs, "."]
        startup = [timed(["--version"], corpus)[0] for _ in range(options.repeat)]
        cold, warm = [], []
        for _ in range(options.cold_repeat):
            shutil.rmtree(cache, ignore_errors=True)
            seconds, result = timed(check, corpus)
            cold.append(seconds)
            cold_summary = summary(result)
        for _ in range(options.repeat):
            seconds, result = timed(check, corpus)
            warm.append(seconds)
            warm_summary = summary(result)
        picked = changed_files(corpus, 10)
        hook, hook_changed = [], 0
        for run in range(options.repeat):
            for name in picked:  # a new edit each time: none of the 10 is in the cache
                with open(os.path.join(corpus, name), "a", encoding="utf-8") as handle:
                    handle.write(f"\n# edit {run}\n")
            seconds, result = timed(["apply", "--diff", "--cache-dir", cache, *jobs, *picked], corpus)
            hook.append(seconds)
            hook_changed = result.stdout.count("\n+++ b/")
        figures = {
            "corpus_files": files,
            "files_scanned": cold_summary["files_scanned"],
            "files_parsed_cold": cold_summary["files_parsed"],
            "files_changed": cold_summary["files_changed"],
            "files_failed": cold_summary["files_failed"],
            "warm_files_cached": warm_summary["files_cached"],
            "warm_files_parsed": warm_summary["files_parsed"],
            "startup_s": statistics.median(startup),
            "cold_check_s": statistics.median(cold),
            "warm_check_s": statistics.median(warm),
            "cold_over_warm": statistics.median(cold) / statistics.median(warm),
            "precommit_10_files_s": statistics.median(hook),
            "precommit_files_with_diff": hook_changed,
            "runs": {"startup": startup, "cold": cold, "warm": warm, "precommit": hook},
            "repeat": options.repeat, "cold_repeat": options.cold_repeat, "jobs": options.jobs or os.cpu_count(),
            "budget_s": BUDGET_S,
            "warm_within_budget": statistics.median(warm) < BUDGET_S,
            "precommit_within_budget": statistics.median(hook) < BUDGET_S,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(options.json) or ".", exist_ok=True)
    with open(options.json, "w", encoding="utf-8") as handle:
        json.dump(figures, handle, indent=2)
    ok = {True: "within budget", False: "OVER BUDGET"}
    print(f"corpus: {files} files from the torch wheel; cold: {figures['files_parsed_cold']} parsed, "
          f"{figures['files_changed']} would change, {figures['files_failed']} failed; warm: "
          f"{figures['warm_files_cached']} from cache, {figures['warm_files_parsed']} parsed; "
          f"jobs={figures['jobs']}; medians of {options.cold_repeat} cold / {options.repeat} other runs")
    print(f"start-up (--version)         {figures['startup_s']:6.2f} s")
    print(f"cold apply --check           {figures['cold_check_s']:6.2f} s  (baseline)")
    print(f"warm apply --check (cached)  {figures['warm_check_s']:6.2f} s  "
          f"{figures['cold_over_warm']:.1f}x faster; {ok[figures['warm_within_budget']]} (< {BUDGET_S:.0f} s)")
    print(f"pre-commit, 10 edited files  {figures['precommit_10_files_s']:6.2f} s  "
          f"({hook_changed} diffs); {ok[figures['precommit_within_budget']]} (< {BUDGET_S:.0f} s)")
    print(f"results: {options.json}")


if __name__ == "__main__":
    main()

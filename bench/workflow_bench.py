"""Workflow benchmark: the result cache and a pre-commit style run.

Corpus: the Python sources of the installed torch wheel (about 2,300 files), copied to a
temporary folder outside any git work tree. Every measurement is a whole `python -m npu_migrate`
subprocess, start-up included, as a user or a hook pays it.

1. cold: `apply --check .` with an empty cache folder (the baseline), `--cold-repeat` times, a
   fresh cache each time;
2. warm: the same command again with the cache filled and nothing changed, `--repeat` times
   (budget: < 2 s);
3. pre-commit style: `apply --diff` over 10 files of the corpus that were just edited (so none is
   in the cache), as pre-commit passes staged files: a seeded uniform sample of the corpus, as a
   commit touches files (budget: < 2 s); and, for reference, a worst case of 10 files with CUDA
   code, which in torch are among its largest modules;
4. start-up, for reference: `python -m npu_migrate --version`, and `apply --check` of one tiny
   file (the fixed cost of every run: imports, rule registry, configuration).

    python bench/workflow_bench.py [--repeat 5] [--cold-repeat 1] [--jobs N] [--json bench/results/workflow.json]
    python bench/workflow_bench.py --limit 200 --repeat 1   # a quick smoke run

Prints medians, the cold/warm ratio and whether each budget holds; also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


def corpus_files(corpus: str) -> list[str]:
    found = []
    for folder, dirs, names in os.walk(corpus):
        dirs.sort()
        found += [os.path.relpath(os.path.join(folder, n), corpus) for n in sorted(names)]
    return found


def sample_files(corpus: str, count: int) -> list[str]:
    """A commit's worth of files: a seeded uniform sample of the corpus (the same every run)."""
    return sorted(random.Random(8).sample(corpus_files(corpus), count))


def cuda_heavy_files(corpus: str, count: int) -> list[str]:
    """`count` files that a CUDA migration touches, spread over the tree (deterministic); in
    torch these are among the largest modules, so this is a worst case, not a typical commit."""
    found = []
    for name in corpus_files(corpus):
        with open(os.path.join(corpus, name), encoding="utf-8", errors="replace") as handle:
            if CUDA_HINT.search(handle.read()):
                found.append(name)
    step = max(1, len(found) // count)
    return found[::step][:count]


def hook_runs(corpus: str, cache: str, picked: list[str], jobs: list[str], repeat: int,
              tag: str) -> tuple[list[float], int]:
    """`apply --diff` over `picked` right after editing them, as pre-commit runs on a commit."""
    times, diffs = [], 0
    for run in range(repeat):
        for name in picked:  # a new edit each time: none of them is in the cache
            with open(os.path.join(corpus, name), "a", encoding="utf-8") as handle:
                handle.write(f"\n# {tag} edit {run}\n")
        seconds, result = timed(["apply", "--diff", "--cache-dir", cache, *jobs, *picked], corpus)
        times.append(seconds)
        diffs = result.stdout.count("\n+++ b/")
    return times, diffs


def size_of(corpus: str, names: list[str]) -> int:
    return sum(os.path.getsize(os.path.join(corpus, n)) for n in names)


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
        # timed runs print what a user sees (text); one untimed JSON run gives the counts
        check = ["apply", "--check", "--cache-dir", cache, *jobs, "."]
        startup = [timed(["--version"], corpus)[0] for _ in range(options.repeat)]
        with open(os.path.join(work, "empty.py"), "w", encoding="utf-8") as handle:
            handle.write("x = 1\n")
        apply_startup = [timed(["apply", "--check", "--no-cache", os.path.join(work, "empty.py")], corpus)[0]
                         for _ in range(options.repeat)]
        cold, warm = [], []
        for _ in range(options.cold_repeat):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(timed(check, corpus)[0])
        for _ in range(options.repeat):
            warm.append(timed(check, corpus)[0])
        counts = summary(timed(check[:2] + ["--format", "json"] + check[2:], corpus)[1])
        typical = sample_files(corpus, 10)
        heavy = cuda_heavy_files(corpus, 10)
        hook, hook_changed = hook_runs(corpus, cache, typical, jobs, options.repeat, "typical")
        heavy_hook, heavy_changed = hook_runs(corpus, cache, heavy, jobs, options.repeat, "heavy")
        figures = {
            "corpus_files": files,
            "files_scanned": counts["files_scanned"],
            "files_changed": counts["files_changed"],
            "files_failed": counts["files_failed"],
            "warm_files_cached": counts["files_cached"],
            "warm_files_parsed": counts["files_parsed"],
            "startup_s": statistics.median(startup),
            "apply_startup_s": statistics.median(apply_startup),
            "cold_check_s": statistics.median(cold),
            "warm_check_s": statistics.median(warm),
            "cold_over_warm": statistics.median(cold) / statistics.median(warm),
            "precommit_10_files_s": statistics.median(hook),
            "precommit_files": typical, "precommit_bytes": size_of(corpus, typical),
            "precommit_files_with_diff": hook_changed,
            "precommit_10_cuda_heavy_s": statistics.median(heavy_hook),
            "cuda_heavy_files": heavy, "cuda_heavy_bytes": size_of(corpus, heavy),
            "cuda_heavy_files_with_diff": heavy_changed,
            "runs": {"startup": startup, "apply_startup": apply_startup, "cold": cold, "warm": warm,
                     "precommit": hook, "precommit_cuda_heavy": heavy_hook},
            "repeat": options.repeat, "cold_repeat": options.cold_repeat,
            "jobs": options.jobs or os.cpu_count(),
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
    print(f"corpus: {files} files from the torch wheel; {figures['files_changed']} would change, "
          f"{figures['files_failed']} failed; warm: {figures['warm_files_cached']} from cache, "
          f"{figures['warm_files_parsed']} parsed; jobs={figures['jobs']}; medians of "
          f"{options.cold_repeat} cold / {options.repeat} other runs")
    print(f"start-up (--version)         {figures['startup_s']:6.2f} s")
    print(f"start-up (apply, 1 tiny file){figures['apply_startup_s']:6.2f} s  (imports, rules, config)")
    print(f"cold apply --check           {figures['cold_check_s']:6.2f} s  (baseline)")
    print(f"warm apply --check (cached)  {figures['warm_check_s']:6.2f} s  "
          f"{figures['cold_over_warm']:.1f}x faster; {ok[figures['warm_within_budget']]} (< {BUDGET_S:.0f} s)")
    print(f"pre-commit, 10 edited files  {figures['precommit_10_files_s']:6.2f} s  "
          f"({figures['precommit_bytes'] / 1e3:.0f} kB, {hook_changed} diffs); "
          f"{ok[figures['precommit_within_budget']]} (< {BUDGET_S:.0f} s)")
    print(f"  worst case: 10 CUDA-heavy  {figures['precommit_10_cuda_heavy_s']:6.2f} s  "
          f"({figures['cuda_heavy_bytes'] / 1e3:.0f} kB, {heavy_changed} diffs; for reference)")
    print(f"results: {options.json}")


if __name__ == "__main__":
    main()

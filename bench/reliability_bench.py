"""Reliability benchmark: real `npu-migrate apply` processes on a generated tree, under edits
made while they run, storms of stop signals (SIGINT, SIGTERM, SIGHUP, SIGKILL) and several runs
on one tree at once. Nothing may be lost, orphaned, left behind or come out differently.

    python bench/reliability_bench.py                       # 3 race, 8 signal, 2 concurrency rounds
    python bench/reliability_bench.py --races 20 --signals 40 --concurrent 10 --seed 7

Prints runs, files checked, bytes lost, orphans, temp files left and non-deterministic outputs
(all but the first two must be 0; the exit status is 1 otherwise). Results also go to
bench/results/reliability.json.

What each figure counts:
- bytes lost: bytes of edits made during a run that are missing afterwards, plus every byte of
  a file that is neither its original nor its migrated self (half-written) after a stop;
- orphans: worker processes still alive 10 s after their main process ended;
- temp files left: `.npu-migrate-tmp*` / `.npu-migrate-*.tmp` entries beside the sources after a
  run that was not SIGKILLed, or after the run that follows a SIGKILLed one;
- non-deterministic outputs: files whose settled content differs from the in-process migration
  of the same bytes, and `--check` / `--diff` disagreeing after concurrent runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "engine")]
from process_table import alive, children  # the signal tests read processes the same way
ENV = dict(os.environ, PYTHONPATH=ROOT)
COMMAND = [sys.executable, "-m", "npu_migrate", "apply", "--isolated", "-j", "2"]
STOP = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]


def generated_file(index: int, functions: int) -> str:
    body = "".join(
        f"def step{i}(model, batch):\n"
        f"    batch = batch.cuda()\n"
        f"    os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"{i % 8}\"\n"
        f"    torch.cuda.synchronize()\n"
        f"    return model(batch).to(\"cuda:{i % 2}\")\n\n\n" for i in range(functions))
    return f"\"\"\"generated module {index}\"\"\"\nimport os\n\nimport torch\n\n\n{body}"


class Tree:
    """A generated tree, its migrated reference (computed in this process) and the edits made."""

    def __init__(self, files: int, functions: int) -> None:
        from npu_migrate.apply.engine import migrate_source

        self.folder = tempfile.mkdtemp(prefix="npu-migrate-reliability-")
        self.names = [f"pkg{i % 4}/mod{i:03}.py" for i in range(files)]
        self.original = {name: generated_file(i, functions) for i, name in enumerate(self.names)}
        self.migrated = {name: migrate_source(text) for name, text in self.original.items()}
        self.edits: dict[str, list[str]] = {}

    def reset(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        for name, text in self.original.items():
            path = os.path.join(self.folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        self.edits = {}

    def read(self, name: str) -> str:
        with open(os.path.join(self.folder, name), encoding="utf-8", newline="") as handle:
            return handle.read()

    def edit(self, name: str, line: str) -> None:
        with open(os.path.join(self.folder, name), "a", encoding="utf-8", newline="") as handle:
            handle.write(line)
        self.edits.setdefault(name, []).append(line)

    def temp_files(self) -> int:
        count = 0
        for _, dirs, files in os.walk(self.folder):
            for name in dirs + files:
                if name.startswith(".npu-migrate-tmp") or (name.startswith(".npu-migrate-") and name.endswith(".tmp")):
                    count += 1
            dirs[:] = [d for d in dirs if not d.startswith(".npu-migrate")]
        return count


def orphans_of(workers: set[int]) -> int:
    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in workers if alive(p)]
    for pid in left:  # do not leave them running for the next round
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(left)


class Stats:
    def __init__(self) -> None:
        self.runs = self.files_checked = self.bytes_lost = self.orphans = 0
        self.temp_left = self.nondeterministic = 0
        self.edits = self.refused = 0  # edits made during runs; files left because of one
        self.exit_codes: dict[str, int] = {}

    def settled(self, tree: Tree) -> None:
        """After a run that completed: every file is the migration of its bytes, edits kept."""
        for name in tree.names:
            text = tree.read(name)
            self.files_checked += 1
            edits = "".join(tree.edits.get(name, []))
            missing = [line for line in tree.edits.get(name, []) if line not in text]
            self.bytes_lost += sum(len(line.encode()) for line in missing)
            if not missing and text != tree.migrated[name] + edits:
                self.nondeterministic += 1

    def stopped(self, tree: Tree) -> None:
        """After a stopped run: every file is whole, the original or the migrated one."""
        for name in tree.names:
            text = tree.read(name)
            self.files_checked += 1
            if text not in (tree.original[name], tree.migrated[name]):
                self.bytes_lost += len(text.encode())


def run_apply(tree: Tree, *extra: str, stats: Stats) -> subprocess.CompletedProcess[str]:
    stats.runs += 1
    return subprocess.run(COMMAND + [*extra, "."], check=False, cwd=tree.folder, env=ENV, capture_output=True,
                          text=True, timeout=900)


def watch(process: subprocess.Popen[bytes], workers: set[int]) -> None:
    workers.update(children(process.pid))


def race_round(tree: Tree, rng: random.Random, stats: Stats, number: int) -> None:
    """An editor appends lines to random files while a cached run migrates the tree."""
    tree.reset()
    process = subprocess.Popen(COMMAND + ["."], cwd=tree.folder, env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    stats.runs += 1
    workers: set[int] = set()
    edit = 0
    while process.poll() is None:
        watch(process, workers)
        time.sleep(rng.uniform(0.01, 0.2))
        name = rng.choice(tree.names)
        tree.edit(name, f"# edit {number}.{edit} made during the run\n")
        edit += 1
    stats.edits += edit
    stats.refused += process.communicate()[1].count("changed during the run")
    stats.orphans += orphans_of(workers)
    stats.temp_left += tree.temp_files()
    settle = run_apply(tree, stats=stats)  # files changed during the run are migrated now
    stats.exit_codes[f"settle {settle.returncode}"] = stats.exit_codes.get(f"settle {settle.returncode}", 0) + 1
    stats.settled(tree)
    stats.temp_left += tree.temp_files()


def signal_round(tree: Tree, rng: random.Random, stats: Stats) -> None:
    """A stop signal at a random moment of a run; then the next run finishes the job."""
    tree.reset()
    signum = rng.choice(STOP)
    process = subprocess.Popen(COMMAND + ["--no-cache", "."], cwd=tree.folder, env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stats.runs += 1
    workers: set[int] = set()
    started = time.monotonic() + 60
    while not workers and process.poll() is None and time.monotonic() < started:
        watch(process, workers)  # the run is under way once its workers exist
        time.sleep(0.02)
    deadline = time.monotonic() + rng.uniform(0.0, 2.0)
    while time.monotonic() < deadline and process.poll() is None:
        watch(process, workers)
        time.sleep(0.02)
    process.send_signal(signum)
    try:
        process.communicate(timeout=60)  # EOF only once every holder of the pipes is gone
    except subprocess.TimeoutExpired:  # something keeps the pipes open: orphaned workers
        process.kill()
        stats.orphans += orphans_of(workers | set(children(process.pid)))
        workers = set()
        process.communicate()
    key = f"{signal.Signals(signum).name} -> {process.returncode}"
    stats.exit_codes[key] = stats.exit_codes.get(key, 0) + 1
    stats.orphans += orphans_of(workers)
    stats.stopped(tree)
    if signum != signal.SIGKILL:
        stats.temp_left += tree.temp_files()
    run_apply(tree, "--no-cache", stats=stats)
    stats.settled(tree)
    stats.temp_left += tree.temp_files()


def concurrent_round(tree: Tree, stats: Stats, runs: int = 3) -> None:
    """Several cached runs on one tree at once; then `--check` and `--diff` must agree."""
    tree.reset()
    processes = [subprocess.Popen(COMMAND + ["."], cwd=tree.folder, env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(runs)]
    stats.runs += runs
    workers: set[int] = set()
    while any(p.poll() is None for p in processes):
        for process in processes:
            watch(process, workers)
        time.sleep(0.05)
    stats.orphans += orphans_of(workers)
    stats.settled(tree)
    stats.temp_left += tree.temp_files()
    check = run_apply(tree, "--check", stats=stats)
    diff = run_apply(tree, "--diff", stats=stats)
    if check.returncode != 0 or diff.returncode != 0 or diff.stdout:
        stats.nondeterministic += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--races", type=int, default=3)
    parser.add_argument("--signals", type=int, default=8)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--functions", type=int, default=60, help="per file: more makes each run longer")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tree = Tree(args.files, args.functions)
    stats = Stats()
    start = time.perf_counter()
    try:
        for number in range(args.races):
            race_round(tree, rng, stats, number)
        for _ in range(args.signals):
            signal_round(tree, rng, stats)
        for _ in range(args.concurrent):
            concurrent_round(tree, stats)
    finally:
        shutil.rmtree(tree.folder, ignore_errors=True)
    seconds = time.perf_counter() - start
    figures = {"runs": stats.runs, "files checked": stats.files_checked, "bytes lost": stats.bytes_lost,
               "orphans": stats.orphans, "temp files left": stats.temp_left,
               "non-deterministic outputs": stats.nondeterministic}
    for label, value in figures.items():
        print(f"{label:>26}: {value}")
    print(f"{'edits during runs':>26}: {stats.edits} ({stats.refused} files left as edited, "
          "migrated by the next run)")
    print(f"{'exit statuses':>26}: " + ", ".join(f"{k} x{v}" for k, v in sorted(stats.exit_codes.items())))
    print(f"{'wall':>26}: {seconds:.0f} s ({args.races} race, {args.signals} signal, "
          f"{args.concurrent} concurrency rounds; {args.files} files; seed {args.seed})")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "reliability.json"), "w", encoding="utf-8") as handle:
        json.dump({**figures, "edits during runs": stats.edits, "files left as edited": stats.refused,
                   "exit statuses": stats.exit_codes, "seconds": seconds, "args": vars(args)},
                  handle, indent=2)
    bad = stats.bytes_lost or stats.orphans or stats.temp_left or stats.nondeterministic
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

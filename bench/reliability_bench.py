"""Reliability benchmark: real `npu-migrate apply` processes on a generated tree, under edits
made while they run, storms of stop signals (SIGINT, SIGTERM, SIGHUP, SIGKILL) and several runs
on one tree at once. Nothing may be lost, orphaned, left behind or come out differently.

    python bench/reliability_bench.py                       # 3 race, 8 signal, 2 concurrency rounds
    python bench/reliability_bench.py --races 20 --signals 40 --concurrent 10 --seed 7
    python bench/reliability_bench.py --races 0 --signals 0 --concurrent 0   # the hostile cases only

Prints runs, files checked, bytes lost, orphans, temp files left and non-deterministic outputs
(all but the first two must be 0; the exit status is 1 otherwise). Then the hostile cases (issue
29), each a real run on a small generated tree beside one hostile thing: a FIFO named `*.py` (found
in a folder, and named), a symbolic link to /dev/zero, a file over the per-file size limit, a run
started under nohup that gets SIGHUP and SIGINT, malformed inputs (code nested deeper than CPython
compiles, a notebook with non-string sources, malformed suppressions, a deeply nested pyproject
value, a 100,000-character rule code, control characters in a file name) and `npu-migrate memory`
on a FIFO. For each: hangs (no answer in --hostile-timeout s), tracebacks, good files left
unmigrated, bytes lost, the exit status and the peak memory of the run; hangs, tracebacks and
lost bytes must be 0. Results also go to bench/results/reliability.json.

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
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench_paths import ROOT as CHECKOUT
from process_table import alive, children  # the signal tests read processes the same way

ROOT = str(CHECKOUT)
ENV = dict(os.environ, PYTHONPATH=ROOT)


def terminal_dispositions() -> None:
    """A run started from a terminal: the default SIGINT and SIGHUP (a bench started in the
    background ignores them, and the tool keeps an inherited "ignore")."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
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
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=terminal_dispositions)
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


# -- hostile cases (issue 29) -----------------------------------------------------------------------
class Case:
    """One hostile thing beside `good` generated files. `make(folder)` builds it and returns the
    command's arguments; `expect` holds the acceptable exit statuses; `migrates` says whether the
    good files must come out migrated (not after a fatal configuration error, exit 2)."""

    def __init__(self, name: str, make: Callable[[str], list[str]], expect: tuple[int, ...], migrates: bool = True,
                 good: int = 12, functions: int = 5, nohup: bool = False) -> None:
        self.name, self.make, self.expect, self.migrates = name, make, expect, migrates
        self.good, self.functions, self.nohup = good, functions, nohup


def _write(folder: str, name: str, text: str) -> None:
    with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _fifo(name: str, *args: str) -> Callable[[str], list[str]]:
    def make(folder: str) -> list[str]:
        os.mkfifo(os.path.join(folder, name))
        return list(args)
    return make


def _huge(folder: str) -> list[str]:
    """13 MB of CUDA code: over the per-file limit (2 MiB), a file that drove the parent to 3 GB."""
    _write(folder, "huge.py", "import torch\n" + "x = torch.ones(2).cuda()\n" * 520_000)
    return ["."]


def _link_to_zero(folder: str) -> list[str]:
    os.symlink("/dev/zero", os.path.join(folder, "zero.py"))
    return ["."]


def _text(name: str, text: str, *args: str) -> Callable[[str], list[str]]:
    def make(folder: str) -> list[str]:
        _write(folder, name, text)
        return list(args) or ["."]
    return make


def _notebook(folder: str) -> list[str]:
    cell = {"cell_type": "code", "source": ["import torch\n", 5], "metadata": {}, "outputs": []}
    _write(folder, "bad.ipynb", json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return ["."]


def _memory_fifo(folder: str) -> list[str]:
    os.mkfifo(os.path.join(folder, "snap.pickle"))
    return ["snap.pickle"]


CASES = [
    Case("FIFO *.py in a folder", _fifo("pipe.py", "."), (0,)),
    Case("FIFO *.py named", _fifo("named.py", "named.py", "pkg0", "pkg1", "pkg2", "pkg3"), (0,)),
    Case("link *.py -> /dev/zero", _link_to_zero, (0,)),
    Case("13 MB file", _huge, (1,)),
    Case("nohup: SIGHUP + SIGINT", lambda folder: ["."], (0,), good=40, functions=60, nohup=True),
    Case("201 brackets deep", _text("deep.py", "import torch\nx = torch.ones(2).cuda()\ny = " + "(" * 201 + "1"
                                    + ")" * 201 + "\n"), (1,)),
    Case("notebook, non-string source", _notebook, (1,)),
    Case("malformed suppressions", _text("sup.py", "import torch\nx = torch.ones(2).cuda()  # npu-migrate: ignore[NPU101,,\n"
                                                   "y = torch.ones(2).cuda()  # npu-migrate: ignore[]\n"), (0, 1)),
    Case("pyproject nested 5000 deep", _text("pyproject.toml", "[tool.npu-migrate]\nselect = " + "[" * 5000
                                             + "]" * 5000 + "\n"), (2,), migrates=False),
    Case("100,000-character code", _text("pyproject.toml", '[tool.npu-migrate]\nselect = ["NPU' + "1" * 100_000
                                         + '"]\n'), (2,), migrates=False),
    Case("control characters in a name (--diff)", _text("\x1b[31mred.py", "import torch\nx = torch.ones(2).cuda()\n",
                                                          "--diff", "."), (1,), migrates=False),
]
MEMORY_CASES = [Case("memory on a FIFO", _memory_fifo, (2,), migrates=False, good=0)]


def _peak_rss(pids: list[int]) -> int:
    """The highest VmHWM (peak resident memory, bytes) among `pids`."""
    peak = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
    return peak


# a hostile run may not take the machine: the /dev/zero link drove a run to 18 GB before the OOM
# killer stopped it; under this limit it fails with a MemoryError (which counts as a traceback)
HOSTILE_MEMORY_LIMIT = 6 * 2**30


def _limited(ignore_stop_signals: bool) -> Callable[[], None]:
    def setup() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (HOSTILE_MEMORY_LIMIT, HOSTILE_MEMORY_LIMIT))
        for signum in (signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN if ignore_stop_signals else signal.SIG_DFL)
    return setup


def hostile_round(case: Case, command: list[str], timeout: float) -> dict[str, Any]:
    """Run `command` (apply or memory) with the case's arguments in a fresh folder."""
    from npu_migrate.apply.engine import migrate_source

    folder = tempfile.mkdtemp(prefix="npu-migrate-hostile-")
    try:
        good = {f"pkg{i % 4}/good{i:02}.py": generated_file(i, case.functions) for i in range(case.good)}
        for name, text in good.items():
            os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
            _write(folder, name, text)
        args = case.make(folder)
        process = subprocess.Popen(command + args, cwd=folder, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   preexec_fn=_limited(case.nohup),
                                   start_new_session=True)
        peak, signalled, started = 0, False, time.monotonic()
        while process.poll() is None and time.monotonic() - started < timeout:
            pids = [process.pid, *children(process.pid)]
            peak = max(peak, _peak_rss(pids))
            if case.nohup and not signalled and len(pids) > 2:  # under way: the terminal goes away
                process.send_signal(signal.SIGHUP)
                process.send_signal(signal.SIGINT)
                signalled = True
            time.sleep(0.05)
        hang = process.poll() is None
        if hang:
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        unmigrated = lost = 0
        for name, text in good.items():
            now = _read_bytes(os.path.join(folder, name))
            expected = migrate_source(text)
            if now not in (text, expected):
                lost += len(now)
            elif case.migrates and not hang and now != expected:
                unmigrated += 1
        return {"case": case.name, "hang": hang, "traceback": "Traceback" in text_err + text_out,
                "exit": None if hang else process.returncode, "expected exit": list(case.expect),
                "good files left unmigrated": unmigrated, "bytes lost": lost, "peak MiB": round(peak / 2**20),
                "seconds": round(time.monotonic() - started, 1), "raw escape on stdout": "\x1b[31m" in text_out,
                "stderr": text_err.strip().splitlines()[-1][:160] if text_err.strip() else ""}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _read_bytes(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def hostile_cases(timeout: float) -> list[dict[str, Any]]:
    apply = [sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "-j", "2"]
    memory = [sys.executable, "-m", "npu_migrate", "memory"]
    results = [hostile_round(case, apply, timeout) for case in CASES]
    return results + [hostile_round(case, memory, timeout) for case in MEMORY_CASES]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--races", type=int, default=3)
    parser.add_argument("--signals", type=int, default=8)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--functions", type=int, default=60, help="per file: more makes each run longer")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--hostile-timeout", type=float, default=60.0, help="seconds before a hostile run is a hang")
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
    hostile = hostile_cases(args.hostile_timeout)
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
    print("hostile cases (issue 29):")
    for row in hostile:
        verdict = ("HANG" if row["hang"] else "TRACEBACK" if row["traceback"]
                   else "ok" if row["exit"] in row["expected exit"] and not row["good files left unmigrated"]
                   and not row["bytes lost"] and not row["raw escape on stdout"] else "WRONG")
        row["verdict"] = verdict
        print(f"  {row['case']:<40} {verdict:<9} exit {row['exit']} (want {row['expected exit']}), "
              f"{row['good files left unmigrated']} good unmigrated, {row['bytes lost']} bytes lost, "
              f"peak {row['peak MiB']} MiB, {row['seconds']} s")
    hangs = sum(r["hang"] for r in hostile)
    tracebacks = sum(r["traceback"] for r in hostile)
    hostile_lost = sum(r["bytes lost"] for r in hostile)
    print(f"{'hostile: hangs':>26}: {hangs}\n{'hostile: tracebacks':>26}: {tracebacks}\n"
          f"{'hostile: bytes lost':>26}: {hostile_lost}\n"
          f"{'hostile: other failures':>26}: {sum(r['verdict'] == 'WRONG' for r in hostile)}")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "reliability.json"), "w", encoding="utf-8") as handle:
        json.dump({**figures, "edits during runs": stats.edits, "files left as edited": stats.refused,
                   "exit statuses": stats.exit_codes, "hostile cases": hostile, "seconds": seconds,
                   "args": vars(args)}, handle, indent=2)
    bad = (stats.bytes_lost or stats.orphans or stats.temp_left or stats.nondeterministic
           or hangs or tracebacks or hostile_lost)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

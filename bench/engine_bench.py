"""Engine benchmark: `npu-migrate apply --check` over the Python sources of the torch wheel,
against LibCST's own rename codemod over the same copy with the same number of jobs.

    python bench/engine_bench.py                 # full run (the baseline takes ~10 minutes)
    python bench/engine_bench.py --repeat 3      # median of 3 runs of ours
    python bench/engine_bench.py --baseline skip # ours only
    python bench/engine_bench.py --baseline skip --compare /work/main
                                                 # ours against another checkout, runs interleaved

Prints wall times (median of --repeat), the ratio, the CPU seconds of each run (user + system of
the whole process tree: on a shared machine the fair comparison), the peak memory of the whole
process tree (sampled from /proc), the load average, and whether two runs gave the same result.
Results also go to bench/results/engine.json.
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
import threading
import time


def torch_sources(destination: str, limit: int | None) -> tuple[int, int]:
    import torch

    root = os.path.dirname(torch.__file__)
    count = size = 0
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            source = os.path.join(folder, name)
            target = os.path.join(destination, "torch", os.path.relpath(source, root))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
            count += 1
            size += os.path.getsize(source)
            if limit and count >= limit:
                return count, size
    return count, size


def _tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pass
        stack.extend(children.get(current, ()))
    return total


CPU_S: list[float] = []  # user + system seconds of each timed command's process tree, in order


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every descendant reaped so far
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: str) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    cpu = _children_cpu()
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(process.pid))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    stop.set()
    sampler.join()
    elapsed = time.perf_counter() - start
    CPU_S.append(_children_cpu() - cpu)
    return elapsed, peak, subprocess.CompletedProcess(command, process.returncode, out, err)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", type=int, default=None, help="only the first N files (quick look)")
    parser.add_argument("--baseline", choices=["full", "skip"], default="full")
    parser.add_argument("--compare", help="another checkout of npu-migrate (e.g. main): its `apply` runs "
                                          "interleaved with ours on the same corpus; the ratio of the medians is printed")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="npu-migrate-bench-")
    try:
        corpus = os.path.join(work, "corpus")
        count, size = torch_sources(corpus, args.files)
        print(f"corpus: {count} files, {size / 1e6:.1f} MB (torch wheel sources)")
        ours_cmd = [sys.executable, "-m", "npu_migrate", "apply", corpus, "--check", "--no-cache",
                    "--format", "json", "--jobs", str(args.jobs)]
        times, peaks, outputs, other_times = [], [], [], []
        cpus: list[float] = []
        other_cpus: list[float] = []
        env = dict(os.environ)
        for _ in range(args.repeat):
            if args.compare:  # interleaved, so both see the same machine load
                os.environ["PYTHONPATH"] = os.path.abspath(args.compare)
                elapsed, _, result = timed(ours_cmd, work)
                os.environ.clear()
                os.environ.update(env)
                if result.returncode not in (0, 1):
                    sys.exit(f"{args.compare}: npu-migrate failed ({result.returncode}): {result.stderr[-2000:]}")
                other_times.append(elapsed)
                other_cpus.append(CPU_S[-1])
                other_parsed = json.loads(result.stdout)["summary"]["files_parsed"]
            elapsed, peak, result = timed(ours_cmd, work)
            if result.returncode not in (0, 1):
                sys.exit(f"npu-migrate failed ({result.returncode}): {result.stderr[-2000:]}")
            times.append(elapsed)
            cpus.append(CPU_S[-1])
            peaks.append(peak)
            outputs.append(json.loads(result.stdout))
        summary = outputs[0]["summary"]
        same = all(o["files"] == outputs[0]["files"] for o in outputs[1:])
        if not same:
            for other in outputs[1:]:
                first = {f["path"]: f for f in outputs[0]["files"]}
                for entry in other["files"]:
                    if first.get(entry["path"]) != entry:
                        print(f"  differs between runs: {entry['path']}")
        ours = statistics.median(times)
        ours_cpu = statistics.median(cpus)
        print(f"npu-migrate apply --check (jobs={args.jobs}): median {ours:.1f} s of {args.repeat} "
              f"{[round(t, 1) for t in times]}, CPU median {ours_cpu:.1f} s {[round(c, 1) for c in cpus]}, "
              f"peak RSS {max(peaks) / 2**20:.0f} MiB, identical results across runs: {same}")
        print(f"  files parsed by LibCST: {summary['files_parsed']}, would change: "
              f"{summary['files_changed']}, failed: {summary['files_failed']}")
        if other_times:
            other = statistics.median(other_times)
            other_cpu = statistics.median(other_cpus)
            print(f"{args.compare}: median {other:.1f} s {[round(t, 1) for t in other_times]}, CPU median "
                  f"{other_cpu:.1f} s {[round(c, 1) for c in other_cpus]}, files parsed by LibCST: {other_parsed}; "
                  f"ours / theirs = {ours / other:.2f} (wall), {ours_cpu / other_cpu:.2f} (CPU)")
        record = {"files": count, "bytes": size, "jobs": args.jobs, "ours_s": times, "compare_s": other_times,
                  "ours_cpu_s": cpus, "compare_cpu_s": other_cpus,
                  "ours_median_s": ours, "ours_peak_rss_bytes": max(peaks), "identical": same,
                  "summary": {k: summary[k] for k in ("files_parsed", "files_changed", "files_failed")}}
        if args.baseline == "full":
            baseline_cmd = [sys.executable, "-m", "libcst.tool", "codemod", "rename.RenameCommand",
                            "-j", str(args.jobs), "--no-format",
                            "--old_name=torch.cuda.synchronize", "--new_name=torch.npu.synchronize",
                            corpus]
            # the baseline rewrites in place: give it its own copy
            baseline_corpus = os.path.join(work, "baseline")
            shutil.copytree(corpus, baseline_corpus)
            baseline_cmd[-1] = baseline_corpus
            elapsed, peak, result = timed(baseline_cmd, work)
            baseline_cpu = CPU_S[-1]
            print(f"baseline libcst.tool codemod rename (jobs={args.jobs}): {elapsed:.1f} s, CPU {baseline_cpu:.1f} s, "
                  f"peak RSS {peak / 2**20:.0f} MiB, exit {result.returncode}")
            print(f"speed-up: {elapsed / ours:.1f}x (wall), {baseline_cpu / ours_cpu:.1f}x (CPU)")
            record.update(baseline_s=elapsed, baseline_cpu_s=baseline_cpu, baseline_peak_rss_bytes=peak,
                          speedup=elapsed / ours, speedup_cpu=baseline_cpu / ours_cpu,
                          baseline_exit=result.returncode)
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
        with open(os.path.join(os.path.dirname(__file__), "results", "engine.json"), "w") as handle:
            json.dump(record, handle, indent=2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark `npu-migrate memory` on a synthetic 1,000,000-event snapshot.

    python bench/memory_bench.py [--events 1000000] [--repeat 1] [--keep DIR]

Generates a training-loop snapshot (parameters, activations, temporaries, optimizer state,
a slow leak, fragmentation from varying sequence lengths; pickle protocol 5), then times in
separate processes: the text report, the HTML report, and as the baseline PyTorch's own
`python -m torch.cuda._memory_viz stats` and `trace_plot` on the same file. Wall time is the
median over --repeat runs; peak RSS is the child's ru_maxrss. Targets: text < 10 s,
HTML < 20 s, peak RSS < 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_paths import ROOT

from npu_migrate.memory.synthetic import training_snapshot


def run(cmd: list[str]) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS in MB, exit code, CPU seconds) of one child process. CPU time
    is the steadier figure on a shared machine."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return elapsed, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def browser_render_ms(page: Path, repeat: int) -> int | None:
    """The page's own data-render-ms (navigation start to everything rendered) in headless
    Chromium, driven over the DevTools protocol (tests/memory/browser.py)."""
    from browser import CHROMIUM, Browser

    if CHROMIUM is None:
        return None
    times = []
    with Browser() as browser:
        for _ in range(repeat):
            attrs = browser.open(page.as_uri()).attrs()
            if attrs.get("render") == "ok" and "renderMs" in attrs:
                times.append(int(attrs["renderMs"]))
    return int(statistics.median(times)) if times else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", help="write the snapshot and outputs here instead of a temp dir")
    args = parser.parse_args()
    workdir = Path(args.keep or tempfile.mkdtemp(prefix="memory_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    snapshot_path = workdir / "synthetic_snapshot.pickle"
    start = time.perf_counter()
    data = training_snapshot(args.events)
    facts = data.pop("_facts")
    with open(snapshot_path, "wb") as handle:
        pickle.dump(data, handle, protocol=5)
    events = len(data["device_traces"][0])
    del data
    print(f"generated {events:,} events, {facts['steps']:,} steps, "
          f"{snapshot_path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s "
          f"-> {snapshot_path}")
    py = sys.executable
    cases = {
        "npu-migrate memory (text)": [py, "-m", "npu_migrate", "memory", "report",
                                      str(snapshot_path), "-o", str(workdir / "report.txt")],
        "npu-migrate memory --html": [py, "-m", "npu_migrate", "memory", "report",
                                      str(snapshot_path), "--html", str(workdir / "report.html"),
                                      "-o", str(workdir / "report_html.txt")],
        "baseline _memory_viz stats": [py, "-m", "torch.cuda._memory_viz", "stats",
                                       str(snapshot_path)],
        "baseline _memory_viz trace_plot": [py, "-m", "torch.cuda._memory_viz", "trace_plot",
                                            str(snapshot_path), "-o", str(workdir / "viz.html")],
    }
    results = {}
    for name, cmd in cases.items():
        runs = [run(cmd) for _ in range(args.repeat)]
        results[name] = {"seconds": statistics.median(r[0] for r in runs),
                         "cpu_seconds": statistics.median(r[3] for r in runs),
                         "peak_rss_mb": max(r[1] for r in runs), "exit": runs[-1][2]}
    base = results["baseline _memory_viz stats"]
    print(f"\n{'case':34} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7} {'wall/stats':>10} "
          f"{'cpu/stats':>9} exit")
    for name, r in results.items():
        print(f"{name:34} {r['seconds']:7.2f} {r['cpu_seconds']:7.2f} {r['peak_rss_mb']:7.0f} "
              f"{r['seconds'] / base['seconds']:9.2f}x {r['cpu_seconds'] / base['cpu_seconds']:8.2f}x"
              f" {r['exit']:4}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    page = workdir / "report.html"
    page_mb = page.stat().st_size / 1e6 if page.exists() else float("nan")
    render_ms = browser_render_ms(page, args.repeat) if page.exists() else None
    print(f"HTML page: {page_mb:.2f} MB; headless Chromium, navigation start to rendered "
          f"(median of {args.repeat}): {render_ms if render_ms is not None else 'n/a'} ms")
    text, html = results["npu-migrate memory (text)"], results["npu-migrate memory --html"]
    verdict = {"text_under_10s": text["seconds"] < 10, "html_under_20s": html["seconds"] < 20,
               "rss_under_2gb": max(text["peak_rss_mb"], html["peak_rss_mb"]) < 2048,
               "page_under_5mb": page_mb < 5,
               "render_under_1s": render_ms is None or render_ms < 1000}
    print("\n" + json.dumps({"events": events, "results": results, "page_mb": page_mb,
                             "render_ms": render_ms, "targets": verdict}))
    return 0 if all(verdict.values()) and text["exit"] == 0 and html["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

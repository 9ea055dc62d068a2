"""The HTML report at scale: page size, first paint and interactions in a real headless browser.

    python bench/memory_html_bench.py [--events 1000000] [--repeat 3] [--keep DIR]

Generates a synthetic training snapshot of about --events events (every layer with its own
call stacks, a slow leak, fragmentation), writes its report with `npu-migrate memory --html`,
then opens the page --repeat times in headless Chromium, driven over the DevTools protocol
(tests/memory/browser.py), and measures in the page (performance.now around the work a click
or key starts, so the protocol's own latency is left out):

* first paint: the browser's first-contentful-paint, and the page's own mark when the timeline
  is drawn (data-first-paint-ms); then when everything is ready (data-render-ms: columns
  decoded, exact series, flame graph, pool view, tables);
* sorting: real mouse clicks on the Block view headers (size, alloc event, lifetime, site) and
  on the Event view's (size, allocated): data-sort-ms, filter + sort + rendering 300 rows;
* the flame graph: choosing each grouping (call stack, operator, thread, stream) in its select,
  and stepping the current event with the arrow keys (flame graph and pool view recomputed at
  the new event): data-flame-ms and data-pool-ms.

Targets (issue 28): file <= 10 MB, first paint <= 1 s, sorting and the flame graph <= 200 ms.
Medians over the repeats; the worst column is what the target is checked against.
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

from browser import Browser

from npu_migrate.memory.synthetic import training_snapshot

BLOCK_SORTS = ("size", "alloc event", "lifetime (events)", "site")
EVENT_SORTS = ("size", "allocated")
FLAME_VIEWS = ("frame", "operator", "thread", "stream")


def header_click(page, name: str) -> float:
    index = page.eval("Array.from(document.querySelectorAll('#table thead th'))"
                      f".map(t => t.textContent).indexOf({json.dumps(name)})")
    page.click(f"#table thead th:nth-child({index + 1})")
    return float(page.attrs()["sortMs"])


def one_visit(browser: Browser, url: str) -> dict[str, float]:
    page = browser.open(url)
    attrs = page.attrs()
    if attrs.get("render") != "ok" or "error" in attrs:
        raise SystemExit(f"the page did not render: {attrs}")
    paint = page.eval("(performance.getEntriesByName('first-contentful-paint')[0] || "
                      "{startTime: NaN}).startTime")
    out = {"first_contentful_paint_ms": float(paint),
           "timeline_drawn_ms": float(attrs["firstPaintMs"]),
           "ready_ms": float(attrs["renderMs"])}
    for name in BLOCK_SORTS:
        out[f"sort blocks by {name} (ms)"] = header_click(page, name)
    page.click(".tabs button[data-tab=events]")
    for name in EVENT_SORTS:
        out[f"sort events by {name} (ms)"] = header_click(page, name)
    for view in FLAME_VIEWS:
        page.eval(f"var s=document.getElementById('flame-view'); s.value={json.dumps(view)};"
                  "s.dispatchEvent(new Event('change'))")
        out[f"flame by {view} (ms)"] = float(page.attrs()["flameMs"])
    page.eval("var s=document.getElementById('flame-view'); s.value='frame';"
              "s.dispatchEvent(new Event('change'))")
    event = int(page.attrs()["event"])
    page.key("ArrowLeft", shift=True)
    page.wait_for(f"document.body.dataset.poolEvent !== '{event}'")
    got = page.attrs()
    out["arrow key: flame at the new event (ms)"] = float(got["flameMs"])
    out["arrow key: pool at the new event (ms)"] = float(got["poolMs"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="write the snapshot and the page here")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="memory_html_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    snapshot = folder / "synthetic_snapshot.pickle"
    data = training_snapshot(args.events, per_layer_stacks=True)
    data.pop("_facts")
    events = len(data["device_traces"][0])
    snapshot.write_bytes(pickle.dumps(data, protocol=5))
    del data
    page = folder / "report.html"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "npu_migrate", "memory", "report", str(snapshot),
                    "--html", str(page), "-o", str(folder / "report.txt")], check=True, cwd=ROOT)
    written = time.perf_counter() - start
    size_mb = page.stat().st_size / 1e6
    print(f"{events:,} events; report with --html written in {written:.1f} s; page "
          f"{size_mb:.2f} MB")
    visits = []
    with Browser() as browser:
        for _ in range(args.repeat):
            visits.append(one_visit(browser, page.as_uri()))
    medians = {key: statistics.median(v[key] for v in visits) for key in visits[0]}
    for key, value in medians.items():
        print(f"  {key:45s} {value:8.1f}")
    sorts = [v for k, v in medians.items() if k.startswith("sort")]
    flames = [v for k, v in medians.items() if "flame" in k]
    targets = {"file_under_10mb": size_mb <= 10,
               "first_paint_under_1s": medians["first_contentful_paint_ms"] <= 1000
               and medians["timeline_drawn_ms"] <= 1000,
               "sorting_under_200ms": max(sorts) <= 200,
               "flame_under_200ms": max(flames) <= 200}
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(json.dumps({"events": events, "page_mb": round(size_mb, 2), "medians": medians,
                      "targets": targets}))
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

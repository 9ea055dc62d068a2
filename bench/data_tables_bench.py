"""What checking the rule data tables on load costs: parsing every codemods/data/*.json (the
baseline, done anyway) against parsing and checking each against its schema
(codemods.data.tables.read_table). Medians of 31 rounds, in one process, the same files.

    python bench/data_tables_bench.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codemods.data import tables as data

ROUNDS = 31


def median_ms(action) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    paths = sorted(data.DATA.glob("*.json"))
    entries = sum(len(json.loads(p.read_text(encoding="utf-8")).get("entries", ())) for p in paths)
    parse = median_ms(lambda: [json.loads(p.read_text(encoding="utf-8")) for p in paths])
    checked = median_ms(lambda: [data.read_table(p) for p in paths])
    print(f"{len(paths)} tables, {entries} entries")
    print(f"parse only:        {parse:.2f} ms (median of {ROUNDS})")
    print(f"parse + schema:    {checked:.2f} ms (median of {ROUNDS})")
    print(f"ratio:             {checked / parse:.1f}x; once per process (tables are cached)")


if __name__ == "__main__":
    main()

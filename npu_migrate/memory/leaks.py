"""MEM001: memory that grows step after step, and the allocation sites that never free.

A site leaks when blocks it allocated in at least two steps other than the last are still
allocated when the trace ends (the last step is excluded: its blocks may simply be in use).
One-off allocations of the first step (parameters, optimizer state) therefore do not count.
"""

from __future__ import annotations

import math

import numpy as np

from npu_migrate.core.diagnostics import Severity, Table
from npu_migrate.memory.context import DeviceContext, fmt_bytes

MIN_LEAK_STEPS = 2
STEP_ROWS = 8  # steps printed at each end of a long run


def analyze_leaks(ctx: DeviceContext) -> None:
    rep, steps = ctx.rep, ctx.steps
    if len(steps) < 2:
        ctx.facts["steps"] = 0
        return
    starts = steps.starts
    at_start = [rep.allocated_before(s) for s in starts] + [int(rep.allocated[-1])]
    rows = []
    # long runs: the first and last steps tell the story
    shown = sorted(set(range(min(STEP_ROWS, len(starts))))
                   | set(range(max(len(starts) - STEP_ROWS, 0), len(starts))))
    for previous, j in zip([-1] + shown, shown):
        if j != previous + 1:
            rows.append(["..."] * 6)
        lo, hi = steps.bounds(j, rep.n_events)
        rows.append([j, starts[j], fmt_bytes(at_start[j]),
                     fmt_bytes(rep.allocated[lo:hi].max()) if hi > lo else "-",
                     fmt_bytes(rep.reserved[lo:hi].max()) if hi > lo else "-",
                     fmt_bytes(at_start[j + 1] - at_start[j])])
    ctx.tables.append(Table(f"Device {ctx.device}: {len(starts)} steps ({steps.source})",
                            ["step", "first event", "allocated at start", "peak allocated",
                             "peak reserved", "growth"], rows))
    diffs = np.diff(np.asarray(at_start[:len(starts)], dtype=np.int64))
    growth = int(np.median(diffs[1:] if len(diffs) > 1 else diffs)) if len(diffs) else 0
    ctx.facts.update(steps=len(starts), growth_per_step=growth)

    blocks = rep.blocks
    held = (blocks.alloc >= starts[0]) & (blocks.free < 0) & (blocks.free_requested == -1)
    survivors = np.flatnonzero(held & (blocks.alloc < starts[-1]))
    step_of = steps.step_of(blocks.alloc[survivors])
    per_site: dict[str, dict] = {}
    for row, step in zip(survivors.tolist(), step_of.tolist()):
        site = ctx.sites.site(int(blocks.stack[row]))
        entry = per_site.setdefault(site, {"steps": set(), "bytes": 0, "blocks": 0,
                                           "first": row})
        entry["steps"].add(step)
        entry["bytes"] += int(blocks.counted[row])
        entry["blocks"] += 1
    needed = max(MIN_LEAK_STEPS, math.ceil(0.5 * (len(starts) - 1)))
    table_rows, leaks = [], []
    for site, entry in sorted(per_site.items(), key=lambda kv: -kv[1]["bytes"]):
        is_leak = len(entry["steps"]) >= needed
        table_rows.append([site, len(entry["steps"]), entry["blocks"], fmt_bytes(entry["bytes"]),
                           "leak" if is_leak else "kept once"])
        if is_leak:
            leaks.append((site, entry))
    if table_rows:
        ctx.tables.append(Table(
            f"Device {ctx.device}: blocks allocated before the last step and never freed",
            ["site", "steps", "blocks", "bytes", "verdict"], table_rows[:15]))
    ctx.facts["leak_sites"] = [site for site, _ in leaks]
    for site, entry in leaks[:5]:
        per_step = entry["bytes"] / len(entry["steps"])
        first_event = int(blocks.alloc[entry["first"]])
        ctx.add("MEM001", f"possible leak at {site}: {entry['blocks']} blocks "
                f"({fmt_bytes(entry['bytes'])}, about {fmt_bytes(per_step)} per step) allocated in "
                f"{len(entry['steps'])} of {len(starts) - 1} completed steps are never freed; "
                f"allocated memory grows {fmt_bytes(growth)} per step (steps from {steps.source})",
                Severity.WARNING, first_event)

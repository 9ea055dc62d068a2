"""MEM001: memory that grows and is never given back, with the evidence behind the verdict.

With step boundaries (see steps.py: markers, annotations or whole-iteration frames), a site
leaks when blocks it allocated in at least half of the completed steps (and two or more) are
still allocated when the trace ends, and allocated memory at step starts grows. One-off
allocations of the first step (parameters, optimizer state) therefore do not count.

Without step evidence, a site leaks when its never-freed blocks are allocated steadily over
the whole run (from its first fifth to its last fifth, no gap over a fifth) and the floor of
allocated memory between two of them rises by what they hold: the growth survives. A single
forward/backward pass fails this (gradients arrive in the second half while activations are
freed), and so do parameters and optimizer state (allocated in one burst).
"""

from __future__ import annotations

import math

from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Severity, Table
from npu_migrate.memory.context import MAX_FINDING_BLOCKS, Bytes, DeviceContext
from npu_migrate.memory.model import FREE_REQ
from npu_migrate.memory.replay import Blocks, Replay

MIN_LEAK_STEPS = 2
STEP_ROWS = 8  # steps printed at each end of a long run
MIN_REPEATS = 4  # without steps: never-freed blocks a site needs
EDGE = 0.2  # without steps: first/last leaked alloc within this share of each end
MAX_GAP = 0.2  # without steps: largest gap between leaked allocs, as a share of the run
RISING_SHARE = 0.9  # share of floor steps that must not fall
SURVIVING_SHARE = 0.5  # the floor must rise by at least this share of the leaked bytes
# what the other sites keep of what they allocate between the site's first and last leaked
# block: a loop frees everything but the leak, a forward pass keeps activations at many lines
RETAINED_SHARE = 0.25
# share of the gaps between a site's never-freed blocks in which something is freed: a loop
# frees its temporaries every iteration, loading a model frees nothing while it allocates
LOOP_GAP_SHARE = 0.5


def analyze_leaks(ctx: DeviceContext) -> None:
    ctx.facts["steps"] = len(ctx.steps)
    ctx.facts["step_source"] = ctx.steps.source
    if ctx.rep.n_events == 0:
        return
    if len(ctx.steps) >= 2:
        _per_step(ctx)
    else:
        _monotone(ctx)


def never_freed(ctx: DeviceContext) -> np.ndarray:
    """Rows of blocks allocated inside the window and still held by the user at the end."""
    blocks = ctx.rep.blocks
    return (blocks.alloc >= 0) & (blocks.free < 0) & (blocks.free_requested == -1)


def _per_step(ctx: DeviceContext) -> None:
    rep, steps = ctx.rep, ctx.steps
    starts = steps.starts
    at_start = [rep.allocated_before(s) for s in starts] + [int(rep.allocated[-1])]
    _step_table(ctx, at_start)
    diffs = np.diff(np.asarray(at_start[:len(starts)], dtype=np.int64))
    growth = int(np.median(diffs[1:] if len(diffs) > 1 else diffs)) if len(diffs) else 0
    # growth from the second step start (after one-off allocations) to the last one
    surviving = at_start[len(starts) - 1] - at_start[min(1, len(starts) - 1)]
    ctx.facts.update(growth_per_step=growth, surviving_growth=int(surviving))

    blocks = rep.blocks
    held = never_freed(ctx) & (blocks.alloc >= starts[0])
    survivors = np.flatnonzero(held & (blocks.alloc < starts[-1]))
    step_of = steps.step_of(blocks.alloc[survivors])
    per_site: dict[str, dict[str, Any]] = {}
    for row, step in zip(survivors.tolist(), step_of.tolist()):
        site = ctx.sites.site(int(blocks.stack[row]))
        entry = per_site.setdefault(site, {"steps": set(), "bytes": 0, "rows": []})
        entry["steps"].add(step)
        entry["bytes"] += int(blocks.counted[row])
        entry["rows"].append(row)
    needed = max(MIN_LEAK_STEPS, math.ceil(0.5 * (len(starts) - 1)))
    table_rows, leaks = [], []
    for site, entry in sorted(per_site.items(), key=lambda kv: -kv[1]["bytes"]):
        is_leak = len(entry["steps"]) >= needed and surviving > 0
        verdict = "leak" if is_leak else ("kept once" if len(entry["steps"]) < needed
                                          else "not growing")
        table_rows.append([site, len(entry["steps"]), len(entry["rows"]), Bytes(entry["bytes"]),
                           verdict])
        if is_leak:
            leaks.append((site, entry))
    if table_rows:
        ctx.tables.append(Table(
            f"Device {ctx.device}: blocks allocated before the last step and never freed",
            ["site", "steps", "blocks", "bytes", "verdict"], table_rows[:15]))
    ctx.facts["leak_sites"] = [site for site, _ in leaks]
    for site, entry in leaks[:5]:
        per_step = entry["bytes"] // len(entry["steps"])
        first_event = int(blocks.alloc[entry["rows"][0]])
        ctx.add("MEM001", f"possible leak at {site}: {len(entry['rows'])} blocks "
                f"({Bytes(entry['bytes'])}, about {Bytes(per_step)} per step) allocated in "
                f"{len(entry['steps'])} of {len(starts) - 1} completed steps are never freed; "
                f"allocated memory at step starts grows {Bytes(growth)} per step "
                f"(evidence: steps from {steps.source})", Severity.WARNING, first_event,
                evidence=f"steps from {steps.source}", site=site, bytes=entry["bytes"],
                blocks=entry["rows"][:MAX_FINDING_BLOCKS])


def _step_table(ctx: DeviceContext, at_start: list[int]) -> None:
    rep, steps = ctx.rep, ctx.steps
    starts = steps.starts
    rows: list[list[Any]] = []
    shown = sorted(set(range(min(STEP_ROWS, len(starts))))
                   | set(range(max(len(starts) - STEP_ROWS, 0), len(starts))))
    for previous, j in zip([-1] + shown, shown):
        if j != previous + 1:
            rows.append([None] * 6)  # the steps in between are not printed
        lo, hi = steps.bounds(j, rep.n_events)
        rows.append([j, starts[j], Bytes(at_start[j]),
                     Bytes(rep.allocated[lo:hi].max()) if hi > lo else None,
                     Bytes(rep.reserved[lo:hi].max()) if hi > lo else None,
                     Bytes(at_start[j + 1] - at_start[j])])
    ctx.tables.append(Table(f"Device {ctx.device}: {len(starts)} steps ({steps.source})",
                            ["step", "first event", "allocated at start", "peak allocated",
                             "peak reserved", "growth"], rows))


def _monotone(ctx: DeviceContext) -> None:
    """No step evidence: growth over the run, judged per site from its never-freed blocks."""
    rep = ctx.rep
    n = rep.n_events
    blocks = rep.blocks
    rows = np.flatnonzero(never_freed(ctx))
    rows = rows[np.argsort(blocks.alloc[rows], kind="stable")]
    by_site: dict[str, list[int]] = {}
    for row, stack in zip(rows.tolist(), blocks.stack[rows].tolist()):
        by_site.setdefault(ctx.sites.site(stack), []).append(row)
    # floor of allocated memory from each event to the end of the trace
    suffix_min = np.minimum.accumulate(rep.allocated[::-1])[::-1]
    table_rows: list[list[Any]] = []
    leaks = []
    for site, site_rows in by_site.items():
        held = int(blocks.counted[site_rows].sum())
        verdict, rise = _judge(rep, blocks, site_rows, suffix_min, n)
        table_rows.append([site, len(site_rows), Bytes(held), Bytes(rise), verdict])
        if verdict == "leak":
            leaks.append((site, site_rows, held, rise))
    table_rows.sort(key=lambda r: -int(r[2]))
    ctx.facts["leak_sites"] = [site for site, *_ in leaks]
    if table_rows:
        ctx.tables.append(Table(
            f"Device {ctx.device}: never-freed blocks by site, judged by growth over the run "
            f"(steps: {ctx.steps.source})",
            ["site", "blocks", "bytes", "floor rise", "verdict"], table_rows[:15]))
    for site, site_rows, held, rise in sorted(leaks, key=lambda x: -x[2])[:5]:
        first, last = int(blocks.alloc[site_rows[0]]), int(blocks.alloc[site_rows[-1]])
        curve = _curve(rep, blocks, site_rows)
        ctx.add("MEM001", f"possible leak at {site}: {len(site_rows)} blocks ({Bytes(held)}) "
                f"allocated steadily from {ctx.when(first)} to {ctx.when(last)} are never freed "
                f"and the floor of allocated memory rises {Bytes(rise)} meanwhile (evidence: "
                f"monotone growth over the run; no step evidence)", Severity.WARNING, first,
                evidence="monotone growth over the run (no step evidence)", site=site,
                bytes=held, blocks=site_rows[:MAX_FINDING_BLOCKS], curve=curve)


def _judge(rep: Replay, blocks: Blocks, site_rows: list[int], suffix_min: np.ndarray, n: int
           ) -> tuple[str, int]:
    """('leak' or why not, how much the allocated floor rose across the site's allocations)."""
    allocs = blocks.alloc[site_rows]
    if len(site_rows) < MIN_REPEATS:
        return "too few blocks", 0
    if allocs[0] > EDGE * n or allocs[-1] < (1 - EDGE) * n:
        return "not spread over the run", 0
    if np.diff(allocs).max(initial=0) > MAX_GAP * n:
        return "allocated in bursts", 0
    floors = suffix_min[allocs]
    steps = np.diff(floors)
    rise = int(floors[-1] - floors[0])
    if rise <= 0 or (steps >= 0).mean() < RISING_SHARE:
        return "not growing", max(rise, 0)
    held_before_last = int(blocks.counted[site_rows[:-1]].sum())
    if rise < SURVIVING_SHARE * held_before_last:
        return "growth does not survive", rise
    if _retained_share(blocks, site_rows, int(allocs[0]), int(allocs[-1])) > RETAINED_SHARE:
        return "kept like a forward pass", rise
    if _gaps_with_frees(rep, allocs) < LOOP_GAP_SHARE:
        return "nothing freed meanwhile (a load, not a loop)", rise
    return "leak", rise


def _gaps_with_frees(rep: Replay, allocs: np.ndarray) -> float:
    """Share of the gaps between consecutive allocations in which some block is freed."""
    frees = np.flatnonzero(rep.trace.action == FREE_REQ)
    if len(allocs) < 2:
        return 0.0
    inside = np.searchsorted(frees, allocs[1:]) - np.searchsorted(frees, allocs[:-1], "right")
    return float((inside > 0).mean())


def _retained_share(blocks: Blocks, site_rows: list[int], first: int, last: int) -> float:
    """Never-freed bytes over all bytes allocated in [first, last] by the other sites."""
    inside = (blocks.alloc >= first) & (blocks.alloc <= last)
    inside[site_rows] = False
    total = int(blocks.counted[inside].sum())
    kept = (inside & (blocks.free < 0) & (blocks.free_requested == -1))
    return int(blocks.counted[kept].sum()) / total if total else 0.0


def _curve(rep: Replay, blocks: Blocks, site_rows: list[int], points: int = 16) -> list[list[int]]:
    """[event, bytes held by the site's never-freed blocks] at up to `points` places."""
    allocs = blocks.alloc[site_rows]
    held = np.cumsum(blocks.counted[site_rows])
    pick = np.unique(np.linspace(0, len(site_rows) - 1, min(points, len(site_rows))).astype(int))
    return [[int(allocs[i]), int(held[i])] for i in pick]

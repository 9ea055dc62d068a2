"""MEM005: blocks held longer than they are needed, as far as a snapshot can tell.

Snapshots record allocs and frees but no accesses, so the judgement is made against the peak
and the step boundaries (see docs/rules/MEM005.md for the exact rules). msMemScope exports
that carry ACCESS events are judged MindStudio's way: first/last access against the lifetime.
"""

from __future__ import annotations

import numpy as np

from npu_migrate.core.diagnostics import Severity, Table
from npu_migrate.memory.context import (
    MAX_FINDING_BLOCKS,
    Bytes,
    DeviceContext,
    fmt_bytes,
)

REPORT_SHARE = 0.05  # report when the wasteful blocks hold 5% of the peak or more
ACCESS_SHARE = 0.5  # msMemScope: gap over 50% of the block's lifetime
NO_STEP_FAR = 0.25  # without steps: "long before/after" is a quarter of the trace


def analyze_waste(ctx: DeviceContext) -> None:
    rep = ctx.rep
    if rep.n_events == 0:
        return
    if ctx.snapshot.accesses:
        _from_accesses(ctx)
        return
    peak, n = rep.peak_index, rep.n_events
    blocks = rep.blocks
    rows = np.flatnonzero(blocks.allocated_at(peak))
    alloc, free = blocks.alloc[rows], blocks.free[rows]
    freed = free >= 0
    if len(ctx.steps) >= 2:
        step = int(ctx.steps.step_of(np.array([peak]))[0])
        lo, hi = ctx.steps.bounds(max(step, 0), n)
        alloc_step = ctx.steps.step_of(alloc)
        kinds = {
            "held into the peak step": (alloc < lo) & (alloc >= 0) & freed & (free < hi),
            "idle across steps": (alloc_step <= step - 2) & (alloc >= 0) & freed,
        }
        basis = f"the peak's step {step} (events {lo}-{hi - 1})"
    else:
        far = int(NO_STEP_FAR * n)
        kinds = {
            "allocated long before the peak": (alloc >= 0) & (alloc < peak - far) & freed
            & (free < peak + far // 5),
            "freed long after the peak": (alloc >= peak - far // 5) & freed & (free > peak + far),
        }
        basis = "a quarter of the trace on either side of the peak (no step boundaries)"
    _report(ctx, rows, kinds, basis)


def _report(ctx: DeviceContext, rows: np.ndarray, kinds: dict[str, np.ndarray], basis: str) -> None:
    blocks = ctx.rep.blocks
    peak_bytes = max(ctx.rep.peak_bytes, 1)
    table, total, wasteful = [], 0, []
    for kind, mask in kinds.items():
        chosen = rows[mask]
        wasteful += chosen.tolist()
        size = int(blocks.counted[chosen].sum())
        total += size
        for site, _, nbytes, count, _ in ctx.group_by_site(chosen, blocks.counted[chosen], 5):
            table.append([kind, site, count, Bytes(nbytes)])
    ctx.facts["wasteful_bytes"] = total
    if not table:
        return
    ctx.tables.append(Table(f"Device {ctx.device}: blocks live at the peak but held longer than "
                            f"needed (judged against {basis})",
                            ["kind", "site", "blocks", "bytes at the peak"], table))
    if total >= REPORT_SHARE * peak_bytes:
        kind, site = table[0][0], table[0][1]
        share = 100 * total / peak_bytes
        ctx.add("MEM005", f"{fmt_bytes(total)} ({share:.0f}% of the peak) is held by blocks "
                f"that are {', '.join(k for k in kinds)} (heuristic, against {basis}); "
                f"largest: {site} ({kind})", Severity.INFO, ctx.rep.peak_index, bytes=total,
                blocks=sorted(set(wasteful))[:MAX_FINDING_BLOCKS])


def _from_accesses(ctx: DeviceContext) -> None:
    blocks = ctx.rep.blocks
    accesses = ctx.snapshot.accesses
    flags = {"lazy_used": [], "delayed_free": [], "long_idle": []}
    times = ctx.rep.times
    for row in np.flatnonzero(blocks.alloc >= 0).tolist():
        key = (ctx.device, int(blocks.addr[row]), int(blocks.alloc[row]))
        if key not in accesses:
            continue
        first, last, max_gap = accesses[key]
        start = int(times[blocks.alloc[row]])
        end = int(times[blocks.free[row]] if blocks.free[row] >= 0 else times[-1])
        life = max(end - start, 1)
        if (first - start) / life > ACCESS_SHARE:
            flags["lazy_used"].append(row)
        if (end - last) / life > ACCESS_SHARE:
            flags["delayed_free"].append(row)
        if max_gap / life > ACCESS_SHARE:
            flags["long_idle"].append(row)
    table, total = [], 0
    for kind, rows in flags.items():
        chosen = np.asarray(rows, np.int64)
        total += int(blocks.counted[chosen].sum()) if len(chosen) else 0
        for site, _, nbytes, count, _ in ctx.group_by_site(chosen, blocks.counted[chosen], 5):
            table.append([kind, site, count, Bytes(nbytes)])
    ctx.facts["wasteful_bytes"] = total
    if table:
        ctx.tables.append(Table(f"Device {ctx.device}: inefficient blocks from access events",
                                ["kind", "site", "blocks", "bytes"], table))
        ctx.add("MEM005", f"{sum(len(v) for v in flags.values())} blocks are inefficient by their "
                f"accesses (lazy_used {len(flags['lazy_used'])}, delayed_free "
                f"{len(flags['delayed_free'])}, long_idle {len(flags['long_idle'])}); largest: "
                f"{table[0][1]} ({table[0][0]})", Severity.INFO, bytes=total,
                blocks=sorted({r for v in flags.values() for r in v})[:MAX_FINDING_BLOCKS])

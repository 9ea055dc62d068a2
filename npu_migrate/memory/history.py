"""MEM006 (the trace misses the start of the run) and MEM008 (frees held back by streams)."""

from __future__ import annotations

import numpy as np

from npu_migrate.core.diagnostics import Severity
from npu_migrate.memory.context import DeviceContext, fmt_bytes

PENDING_SHARE = 0.01  # report pending frees above 1% of the peak


def analyze_history(ctx: DeviceContext) -> None:
    rep, blocks = ctx.rep, ctx.rep.blocks
    before = np.flatnonzero(blocks.alloc < 0)
    settings = ctx.snapshot.allocator_settings
    overflowed = bool(settings.get("trace_alloc_overflowed"))
    ctx.facts["blocks_before_window"] = len(before)
    if rep.n_events and (len(before) or overflowed or rep.initial[2] > 0):
        ghosts = int((blocks.free[before] < 0).sum())
        ctx.add("MEM006", f"the trace starts mid-run: {fmt_bytes(rep.initial[2])}"
                f" reserved and {fmt_bytes(rep.initial[0])} allocated before its first event; "
                f"{len(before)} blocks were allocated earlier ({ghosts} still live at the end, "
                f"their stacks from the final segments); totals are rebuilt backwards from the "
                f"dump-time state" + ("; the ring buffer overflowed" if overflowed else ""),
                Severity.INFO, 0)
    if rep.n_events == 0:
        return
    pending = held_pending(ctx)
    worst = int(np.argmax(pending))
    if pending[worst] > 0 and pending[worst] >= PENDING_SHARE * max(rep.peak_bytes, 1):
        rows = np.flatnonzero(_held_rows(blocks) & blocks.active_at(worst)
                              & ~blocks.allocated_at(worst))
        top = ctx.group_by_site(rows, blocks.counted[rows], limit=1)
        site = f"; largest: {top[0][0]}" if top else ""
        ctx.add("MEM008", f"{fmt_bytes(pending[worst])} was freed but still held for other streams "
                f"(active_pending_free) at {ctx.when(worst)}{site}; record_stream keeps blocks "
                "until the other stream's work completes", Severity.INFO, worst)
    ctx.facts["max_pending"] = int(pending[worst])


def _held_rows(blocks) -> np.ndarray:
    """Blocks whose free completed later than the very next event, or never: a free_requested
    directly followed by its free_completed is the normal, instant path."""
    req, done = blocks.free_requested, blocks.free
    return (req >= 0) & ((done < 0) | (done - req > 1))


def held_pending(ctx: DeviceContext) -> np.ndarray:
    """Bytes freed by the user but not yet back in the pool, after each event."""
    blocks, n = ctx.rep.blocks, ctx.rep.n_events
    rows = np.flatnonzero(_held_rows(blocks))
    delta = np.zeros(n + 1, np.int64)
    np.add.at(delta, blocks.free_requested[rows], blocks.counted[rows])
    ends = blocks.free[rows]
    closed = ends >= 0
    np.add.at(delta, ends[closed], -blocks.counted[rows][closed])
    return np.cumsum(delta[:n])

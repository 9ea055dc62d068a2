"""MEM002 fragmentation and MEM003 out-of-memory events.

Fragmentation is judged where it costs memory: a new segment was reserved although the
same stream's segments held enough free bytes in total, just not in one piece. OOM events
are explained with the pool state at that moment: what was asked, what was free on the
device, what the cache held and its largest free block.
"""

from __future__ import annotations

import numpy as np

from npu_migrate.core.diagnostics import Severity, Table
from npu_migrate.memory.context import Bytes, DeviceContext, fmt_bytes
from npu_migrate.memory.model import ALLOC, OOM, SEG_ALLOC

SMALL_POOL_LIMIT = 1 << 20  # requests under 1 MiB go to the small pool
MAX_CHECKED = 64  # segment allocations inspected (the largest first)
WASTE_SHARE = 0.05  # forced growth worth reporting, as a share of peak reserved


def analyze_fragmentation(ctx: DeviceContext) -> None:
    rep = ctx.rep
    if rep.n_events:
        _over_time(ctx)
        _forced_segments(ctx)
    _final_segments(ctx)


def _over_time(ctx: DeviceContext) -> None:
    rep = ctx.rep
    gap = rep.reserved - rep.allocated
    worst = int(np.argmax(gap))
    at_peak = rep.peak_reserved_index
    peak_reserved, peak_allocated = rep.reserved_after(at_peak), rep.allocated_after(at_peak)
    ctx.facts.update(peak_reserved=peak_reserved,
                     unused_at_peak_reserved=peak_reserved - peak_allocated,
                     worst_unused=int(gap[worst]))
    ctx.tables.append(Table(f"Device {ctx.device}: reserved but not allocated",
                            ["moment", "reserved", "allocated", "reserved - allocated"], [
        [f"peak reserved, {ctx.when(at_peak)}", Bytes(peak_reserved),
         Bytes(peak_allocated), Bytes(peak_reserved - peak_allocated)],
        [f"widest, {ctx.when(worst)}", Bytes(rep.reserved[worst]),
         Bytes(rep.allocated[worst]), Bytes(gap[worst])],
        ["end of trace", Bytes(rep.reserved[-1]), Bytes(rep.allocated[-1]),
         Bytes(gap[-1])]]))


def _request_after(ctx: DeviceContext, event: int) -> int:
    """The allocation that caused a segment: the alloc at its address just after it."""
    trace = ctx.rep.trace
    for k in range(event + 1, min(event + 8, ctx.rep.n_events)):
        if trace.action[k] == ALLOC and trace.addr[k] == trace.addr[event]:
            return int(trace.size[k])
    return int(trace.size[event])


def _forced_segments(ctx: DeviceContext) -> None:
    trace = ctx.rep.trace
    events = np.flatnonzero((trace.action == SEG_ALLOC) & (trace.size > 2 * SMALL_POOL_LIMIT))
    events = events[np.argsort(-trace.size[events], kind="stable")][:MAX_CHECKED]
    forced = []
    for event in sorted(events.tolist()):
        request = _request_after(ctx, event)
        if request < SMALL_POOL_LIMIT:
            continue
        pool = ctx.pool(event - 1)
        same = [s for s in pool.segments if s.stream == int(trace.stream[event])
                and not s.expandable and s.size > 2 * SMALL_POOL_LIMIT]
        free = sum(s.free for s in same)
        largest = max((s.largest_gap for s in same), default=0)
        if free >= request > largest:
            forced.append((event, request, int(trace.size[event]), free, largest, pool.free))
    ctx.facts["forced_segments"] = forced
    if not forced:
        return
    ctx.tables.append(Table(
        f"Device {ctx.device}: segments reserved although enough memory was free in pieces",
        ["event", "request", "new segment", "free in the stream's segments", "largest free block",
         "free in the whole pool"],
        [[ctx.when(e), Bytes(r), Bytes(s), Bytes(f), Bytes(g), Bytes(t)]
         for e, r, s, f, g, t in forced[:20]]))
    wasted = sum(f[2] for f in forced)
    share = wasted / max(ctx.facts.get("peak_reserved", 1), 1)
    if share >= WASTE_SHARE:
        event, request, _, free, largest, total = max(forced, key=lambda f: f[2])
        # anchored on the event before the new segment: the pool view there shows the state
        # the message describes, with the same free-memory definition (PoolState.free)
        ctx.add("MEM002", f"fragmentation: {len(forced)} new segments ({fmt_bytes(wasted)}, "
                f"{100 * share:.0f}% of peak reserved) were reserved while the cached free memory "
                f"was enough but split; e.g. after {ctx.when(event - 1)} a {fmt_bytes(request)} "
                f"request found {fmt_bytes(free)} free in its stream's large segments (of "
                f"{fmt_bytes(total)} free in the pool: reserved minus the blocks in use or pending "
                f"free) whose largest block was {fmt_bytes(largest)}", Severity.WARNING,
                event - 1, bytes=wasted)


def _final_segments(ctx: DeviceContext) -> None:
    pool = ctx.pool(ctx.rep.n_events - 1)
    segs = sorted(pool.segments, key=lambda s: -s.free)
    ctx.facts.update(final_free=pool.free, final_largest_gap=pool.largest_gap,
                     expandable=any(s.is_expandable for s in ctx.snapshot.segments
                                    if s.device == ctx.device),
                     private_pools=sorted({s.pool_id for s in ctx.snapshot.segments
                                           if s.device == ctx.device} - {(0, 0)}))
    if not segs:
        return
    ctx.tables.append(Table(
        f"Device {ctx.device}: segments at the end ({len(segs)}; total free {fmt_bytes(pool.free)},"
        f" largest free block {fmt_bytes(pool.largest_gap)})",
        ["address", "size", "allocated", "free", "largest free block", "free pieces", "pool",
         "expandable"],
        [[hex(s.address), Bytes(s.size), Bytes(s.used), Bytes(s.free),
          Bytes(s.largest_gap), s.gaps, s.pool_id, s.expandable] for s in segs[:12]]))


def analyze_oom(ctx: DeviceContext) -> None:
    rep = ctx.rep
    trace = rep.trace
    for event in np.flatnonzero(trace.action == OOM).tolist()[:5]:
        request, device_free = int(trace.size[event]), int(trace.addr[event])
        pool = ctx.pool(event)
        cached_free, largest = pool.free, pool.largest_gap
        blocks = rep.blocks
        rows = np.flatnonzero(blocks.allocated_at(event))
        top = ctx.group_by_site(rows, blocks.counted[rows], limit=5)
        ctx.tables.append(Table(f"Device {ctx.device}: live at the OOM of {ctx.when(event)}",
                                ["site", "category", "bytes", "blocks"],
                                [[s, c, Bytes(b), n] for s, c, b, n, _ in top]))
        if request <= device_free + cached_free and request > largest:
            verdict = (f"it would have fit: {fmt_bytes(cached_free)} sat free in the cache "
                       f"(largest block {fmt_bytes(largest)}) plus {fmt_bytes(device_free)} on the "
                       "device; a layout without split segments (expandable_segments) avoids this")
            ctx.facts["oom_fragmented"] = True
        else:
            short = request - device_free - cached_free
            verdict = (f"it did not fit even with the cache compacted: {fmt_bytes(short)} short; "
                       "lower the peak (smaller batch, activation checkpointing, mixed precision)")
            ctx.facts["oom_short"] = True
        site = top[0][0] if top else "unknown"
        ctx.add("MEM003", f"out of memory at {ctx.when(event)}: asked {fmt_bytes(request)} with "
                f"{fmt_bytes(rep.allocated[event])} allocated, {fmt_bytes(rep.reserved[event])} "
                f"reserved, {fmt_bytes(device_free)} free on the device; {verdict}; largest "
                f"holder {site}", Severity.ERROR, event)

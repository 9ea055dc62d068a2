"""`--html`: one self-contained offline page (our own inline JS/CSS, no CDN).

The browser never gets every event or block: the timeline is cut into at most
MAX_BUCKETS min/max buckets, the lifetime chart gets the MAX_BLOCKS blocks that cover the
most bytes x events, and the pool view gets MAX_MOMENTS precomputed moments.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Report
from npu_migrate.memory.context import DeviceContext
from npu_migrate.memory.model import ACTIONS, OOM, SEG_ALLOC, SEG_MAP, Snapshot
from npu_migrate.memory.sites import format_stack

MAX_BUCKETS = 20000
MAX_BLOCKS = 2500
MAX_MOMENTS = 24
MAX_POOL_BLOCKS = 3000
MAX_SEGMENTS = 64
MAX_STEPS = 20000  # step boundary lines sent (drawn only when they are 4 px apart)
MAX_TABLE_BLOCKS = 6000  # rows of the Block view: findings' blocks, the peak's, the longest
MAX_TABLE_EVENTS = 12000  # rows of the Event view: those blocks' events, around the peak/findings
EVENT_CONTEXT = 100  # events sent on each side of the peak and of each finding
TOP_SITES = 25


def write_html(snapshot: Snapshot, contexts: list[DeviceContext], report: Report,
               path: str, thresholds: object = None) -> None:
    details = {k: v for c in contexts for k, v in c.details.items()}
    findings = []
    for d in report.findings:
        record = details.get(id(d), {})
        findings.append({"text": d.format(with_doc=False), "code": d.code,
                         "severity": d.severity.value, "device": record.get("device"),
                         "event": record.get("event"), "blocks": record.get("blocks", [])})
    payload = {"file": snapshot.path, "producer": snapshot.producer,
               "findings": findings,
               "summary": {k: str(v) for k, v in report.summary.items()},
               "devices": [device_payload(ctx, findings) for ctx in contexts]}
    assets = resources.files("npu_migrate.memory").joinpath("assets")
    page = assets.joinpath("report.html").read_text(encoding="utf-8")
    data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    page = (page.replace("/*CSS*/", assets.joinpath("report.css").read_text(encoding="utf-8"))
            .replace("/*JS*/", assets.joinpath("report.js").read_text(encoding="utf-8"))
            .replace("{{DATA}}", data))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page)


def buckets(n: int) -> np.ndarray:
    """Start index of each bucket (all events when there are few)."""
    count = min(n, MAX_BUCKETS)
    return np.unique((np.arange(count, dtype=np.int64) * n) // max(count, 1))


def series_payload(ctx: DeviceContext) -> dict[str, Any]:
    rep = ctx.rep
    starts = buckets(rep.n_events)
    if not len(starts):
        return {"x": [], "amax": [], "amin": [], "rmax": [], "rmin": [], "act": []}
    out = {"x": starts.tolist()}
    for key, values, reducer in (("amax", rep.allocated, np.maximum), ("amin", rep.allocated,
                                 np.minimum), ("rmax", rep.reserved, np.maximum),
                                 ("rmin", rep.reserved, np.minimum),
                                 ("act", rep.active, np.maximum)):
        out[key] = reducer.reduceat(values, starts).tolist()
    times = rep.trace.time_us
    if times is not None:
        out["t"] = np.round((times[starts] - times[0]) / 1e6, 6).tolist()
    return out


def address_space(ctx: DeviceContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every address range that was ever a segment, merged; returns starts, ends, offsets
    so that a block's y position is offset + (address - start)."""
    trace = ctx.rep.trace
    grow = (trace.action == SEG_ALLOC) | (trace.action == SEG_MAP)
    starts = [s.address for s in ctx.snapshot.segments if s.device == ctx.device]
    ends = [s.address + s.total_size for s in ctx.snapshot.segments if s.device == ctx.device]
    starts = np.concatenate([np.asarray(starts, np.int64), trace.addr[grow],
                             ctx.rep.blocks.addr])
    ends = np.concatenate([np.asarray(ends, np.int64), trace.addr[grow] + trace.size[grow],
                           ctx.rep.blocks.addr + ctx.rep.blocks.size])
    if not len(starts):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    running_end = np.maximum.accumulate(ends)
    new = np.concatenate([[True], starts[1:] > running_end[:-1]])
    merged_starts = starts[new]
    merged_ends = np.maximum.reduceat(ends, np.flatnonzero(new))
    sizes = merged_ends - merged_starts
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return merged_starts, merged_ends, offsets


def blocks_payload(ctx: DeviceContext, stacks: set[int]) -> dict[str, Any]:
    rep, blocks = ctx.rep, ctx.rep.blocks
    n = rep.n_events
    begin = np.maximum(blocks.alloc, 0)
    end = np.where(blocks.free < 0, n, blocks.free)
    weight = blocks.size.astype(np.float64) * np.maximum(end - begin, 1)
    rows = np.argsort(-weight, kind="stable")[:MAX_BLOCKS]
    starts, ends, offsets = address_space(ctx)
    where = np.clip(np.searchsorted(starts, blocks.addr[rows], side="right") - 1, 0, None)
    y = offsets[where] + (blocks.addr[rows] - starts[where]) if len(starts) else np.zeros(len(rows))
    stacks.update(int(s) for s in blocks.stack[rows])
    drawn = [[int(r), int(begin[r]), int(end[r]), int(yy), int(blocks.size[r]),
              int(blocks.requested[r]), int(blocks.state[r]), int(blocks.stack[r]),
              hex(int(blocks.addr[r])), int(blocks.alloc[r]), int(blocks.free[r])]
             for r, yy in zip(rows.tolist(), np.asarray(y).tolist())]
    return {"rows": drawn, "total": len(blocks),
            "space": int((ends - starts).sum()) if len(starts) else 0}


def moments(ctx: DeviceContext) -> list[int]:
    rep = ctx.rep
    n = rep.n_events
    if n == 0:
        return []
    chosen = set(np.linspace(0, n - 1, MAX_MOMENTS - 4).astype(int).tolist())
    chosen |= {rep.peak_index, rep.peak_reserved_index}
    chosen |= set(np.flatnonzero(rep.trace.action == OOM)[:2].tolist())
    return sorted(chosen)


def pool_payload(ctx: DeviceContext, event: int, stacks: set[int]) -> dict[str, Any]:
    pool = ctx.pool(event)
    blocks = ctx.rep.blocks
    allocated = blocks.allocated_at(event)
    segs = sorted(pool.segments, key=lambda s: -s.size)[:MAX_SEGMENTS]
    per_segment = max(MAX_POOL_BLOCKS // max(len(segs), 1), 16)
    out = []
    for seg in segs:
        rows = seg.rows
        stacks.update(int(s) for s in blocks.stack[rows[:per_segment]])
        out.append({"addr": hex(seg.address), "size": seg.size, "free": seg.free,
                    "largest": seg.largest_gap, "pieces": seg.gaps, "exp": seg.expandable,
                    "blocks": _segment_blocks(blocks, allocated, rows, seg.address, per_segment)})
    return {"event": event, "reserved": pool.reserved, "free": pool.free,
            "largest": pool.largest_gap, "segments": out,
            "more_segments": max(len(pool.segments) - MAX_SEGMENTS, 0)}


def _segment_blocks(blocks, allocated: np.ndarray, rows: np.ndarray, base: int,
                    limit: int) -> list[list[int]]:
    """[offset, size, state, row, stack] per block; a crowded segment is sent as runs of
    touching blocks in the same state instead (row -1: several blocks)."""
    if len(rows) <= limit:
        return [[int(blocks.addr[r] - base), int(blocks.size[r]), 0 if allocated[r] else 1,
                 int(r), int(blocks.stack[r])] for r in rows.tolist()]
    runs: list[list[int]] = []
    for r in rows.tolist():
        offset, size = int(blocks.addr[r] - base), int(blocks.size[r])
        state = 0 if allocated[r] else 1
        last = runs[-1] if runs else None
        if last and last[2] == state and last[0] + last[1] == offset:
            last[1] += size
            last[3] = -1
        else:
            runs.append([offset, size, state, int(r), int(blocks.stack[r])])
    return runs


def table_rows(ctx: DeviceContext, findings: list[dict[str, Any]]) -> np.ndarray:
    """Block rows for the Block view: every block a finding names first, then those live at
    the peak, then the ones covering the most bytes x events."""
    rep, blocks = ctx.rep, ctx.rep.blocks
    named = [b for f in findings if f["device"] == ctx.device for b in f["blocks"]]
    peak = np.flatnonzero(blocks.allocated_at(rep.peak_index))
    peak = peak[np.argsort(-blocks.size[peak], kind="stable")]
    begin = np.maximum(blocks.alloc, 0)
    end = np.where(blocks.free < 0, rep.n_events, blocks.free)
    longest = np.argsort(-(blocks.size.astype(np.float64) * np.maximum(end - begin, 1)),
                         kind="stable")
    chosen = np.concatenate([np.asarray(named, np.int64), peak, longest])
    _, first = np.unique(chosen, return_index=True)
    return np.sort(chosen[np.sort(first)][:MAX_TABLE_BLOCKS])


def tables_payload(ctx: DeviceContext, findings: list[dict[str, Any]]) -> dict[str, Any]:
    """Columnar Block view, Event view and top sites; sites are sent once, rows index them."""
    rep, blocks, trace = ctx.rep, ctx.rep.blocks, ctx.rep.trace
    rows = table_rows(ctx, findings)
    site_index: dict[str, int] = {}

    def site_of(stack: int) -> int:
        return site_index.setdefault(ctx.sites.site(stack), len(site_index))

    block_cols = {
        "id": rows.tolist(), "requested": blocks.requested[rows].tolist(),
        "size": blocks.size[rows].tolist(),
        "addr": [hex(a) for a in blocks.addr[rows].tolist()],
        "state": blocks.state[rows].tolist(), "alloc": blocks.alloc[rows].tolist(),
        "free": blocks.free[rows].tolist(),
        "site": [site_of(s) for s in blocks.stack[rows].tolist()],
    }
    owners, accesses = ctx.snapshot.owners, ctx.snapshot.accesses
    if owners or accesses:  # msMemScope: owner and first/last access (µs)
        keys = list(zip(blocks.addr[rows].tolist(), blocks.alloc[rows].tolist()))
        block_cols["owner"] = [owners.get((ctx.device, a), "") for _, a in keys]
        block_cols["first_access"] = [a.first if (a := accesses.get((ctx.device, al))) else None
                                      for _, al in keys]
        block_cols["last_access"] = [a.last if (a := accesses.get((ctx.device, al))) else None
                                     for _, al in keys]
    n = rep.n_events
    around = [rep.peak_index] + [m["event"] for m in ctx.marks]
    ids = [blocks.alloc[rows], blocks.free[rows]]
    ids += [np.arange(max(e - EVENT_CONTEXT, 0), min(e + EVENT_CONTEXT, n)) for e in around]
    events = np.unique(np.concatenate(ids).astype(np.int64)) if n else np.zeros(0, np.int64)
    events = events[(events >= 0) & (events < n)][:MAX_TABLE_EVENTS]
    event_cols = {
        "id": events.tolist(), "action": trace.action[events].tolist(),
        "addr": [hex(a) for a in trace.addr[events].tolist()],
        "size": trace.size[events].tolist(), "allocated": rep.allocated[events].tolist(),
        "reserved": rep.reserved[events].tolist(),
        "site": [site_of(s) for s in trace.stack[events].tolist()],
    }
    return {"blocks": block_cols, "events": event_cols, "sites": list(site_index),
            "actions": list(ACTIONS), "top_sites": top_sites(ctx),
            "blocks_total": len(blocks), "events_total": int(n)}


def top_sites(ctx: DeviceContext) -> list[list[Any]]:
    """[site, blocks, bytes allocated, bytes live at the peak] for the largest sites."""
    blocks = ctx.rep.blocks
    live = blocks.allocated_at(ctx.rep.peak_index)
    stacks, inverse = np.unique(blocks.stack, return_inverse=True)
    inverse = inverse.ravel()
    count = np.bincount(inverse, minlength=len(stacks))
    total = np.bincount(inverse, weights=blocks.counted, minlength=len(stacks))
    at_peak = np.bincount(inverse, weights=np.where(live, blocks.counted, 0),
                          minlength=len(stacks))
    by_site: dict[str, list[int]] = {}
    for stack, c, t, p in zip(stacks.tolist(), count.tolist(), total.tolist(),
                              at_peak.tolist()):
        entry = by_site.setdefault(ctx.sites.site(stack), [0, 0, 0])
        entry[0] += c
        entry[1] += int(t)
        entry[2] += int(p)
    ranked = sorted(by_site.items(), key=lambda kv: -kv[1][1])[:TOP_SITES]
    return [[site, c, t, p] for site, (c, t, p) in ranked]


def device_payload(ctx: DeviceContext, findings: list[dict[str, Any]] | None = None
                   ) -> dict[str, Any]:
    rep = ctx.rep
    stacks: set[int] = set()
    payload = {
        "device": ctx.device, "events": rep.n_events, "has_time": rep.trace.time_us is not None,
        "peak": {"event": rep.peak_index, "bytes": rep.peak_bytes},
        "series": series_payload(ctx),
        "steps": ctx.steps.starts[:MAX_STEPS], "step_count": len(ctx.steps),
        "step_source": ctx.steps.source,
        "marks": ctx.marks,
        "blocks": blocks_payload(ctx, stacks),
        "pools": [pool_payload(ctx, e, stacks) for e in moments(ctx)],
        "tables": tables_payload(ctx, findings or []),
    }
    payload["stacks"] = {str(s): {"site": ctx.sites.site(s),
                                  "frames": format_stack(ctx.snapshot.stacks[s], 30)}
                         for s in sorted(stacks) if s >= 0}
    return payload

"""`--html`: one self-contained offline page (our own inline JS/CSS, no CDN).

The page gets every block of every device, as binary columns: each column is byte-shuffled
(the k-th bytes of all values together, so the constant high bytes compress away),
zlib-compressed and base64-encoded; the browser inflates them with its built-in
DecompressionStream. From those columns the page computes, at any event and on demand, the
live memory by stack (the flame graph), the pool state (segments and blocks) and the tables;
only the timeline comes pre-aggregated (at most MAX_BUCKETS min/max buckets).
"""

from __future__ import annotations

import base64
import json
import zlib
from importlib import resources
from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Report
from npu_migrate.memory.context import DeviceContext
from npu_migrate.memory.flame import block_column
from npu_migrate.memory.model import (
    ACTIONS,
    ALLOC,
    FREE_DONE,
    FREE_REQ,
    OOM,
    PSEUDO_BASE,
    SEG_ALLOC,
    SEG_FREE,
    SEG_MAP,
    SEG_UNMAP,
    Snapshot,
)
from npu_migrate.memory.sites import format_stack
from npu_migrate.memory.waste import HELD_KIND, Thresholds

MAX_BUCKETS = 20000
MAX_STEPS = 20000  # step boundary lines sent (drawn only when they are 4 px apart)
MAX_FRAMES = 64  # frames per stack sent (the innermost)
SEGMENT_ACTIONS = (SEG_ALLOC, SEG_FREE, SEG_MAP, SEG_UNMAP)
FLAG_HELD = 1  # server-side idle flag of snapshot blocks (MEM005)


def write_html(snapshot: Snapshot, contexts: list[DeviceContext], report: Report,
               path: str, thresholds: Thresholds | None = None) -> None:
    details = {k: v for c in contexts for k, v in c.details.items()}
    findings = []
    for d in report.findings:
        record = details.get(id(d), {})
        findings.append({"text": d.format(with_doc=False), "code": d.code,
                         "severity": d.severity.value, "device": record.get("device"),
                         "event": record.get("event"), "blocks": record.get("blocks", [])})
    limits = thresholds or Thresholds()
    payload = {"file": snapshot.path, "producer": snapshot.producer, "findings": findings,
               "summary": {k: str(v) for k, v in report.summary.items()},
               "thresholds": {name: {"share": t.share, "micros": t.micros} for name, t in (
                   ("lazy", limits.lazy), ("delayed", limits.delayed), ("idle", limits.idle))},
               "start": opening_device(contexts),
               "devices": [device_payload(ctx) for ctx in contexts]}
    assets = resources.files("npu_migrate.memory").joinpath("assets")
    page = assets.joinpath("report.html").read_text(encoding="utf-8")
    data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    page = (page.replace("/*CSS*/", assets.joinpath("report.css").read_text(encoding="utf-8"))
            .replace("/*JS*/", assets.joinpath("report.js").read_text(encoding="utf-8"))
            .replace("{{DATA}}", data))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page)


def opening_device(contexts: list[DeviceContext]) -> int:
    """Index of the device the page opens on: the first with an OOM, else the highest peak."""
    for index, ctx in enumerate(contexts):
        if (ctx.rep.trace.action == OOM).any():
            return index
    peaks = [ctx.rep.peak_bytes for ctx in contexts]
    return int(np.argmax(peaks)) if peaks else 0


def packed(values: np.ndarray) -> dict[str, Any]:
    """A numeric column as {dtype, n, b64}: byte-shuffled, zlib-compressed, base64."""
    raw = np.ascontiguousarray(values)
    width = raw.dtype.itemsize
    shuffled = raw.view(np.uint8).reshape(-1, width).T.tobytes() if len(raw) else b""
    return {"dtype": raw.dtype.name, "n": len(raw),
            "b64": base64.b64encode(zlib.compress(shuffled, 6)).decode("ascii")}


def buckets(n: int) -> np.ndarray:
    """Start index of each bucket (all events when there are few)."""
    count = min(n, MAX_BUCKETS)
    return np.unique((np.arange(count, dtype=np.int64) * n) // max(count, 1))


def series_payload(ctx: DeviceContext) -> dict[str, Any]:
    rep = ctx.rep
    starts = buckets(rep.n_events)
    if not len(starts):
        return {"x": [], "amax": [], "amin": [], "rmax": [], "rmin": [], "act": []}
    out: dict[str, Any] = {"x": starts.tolist()}
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
    """Every address range that was ever a segment or a block, merged; returns starts, ends
    and offsets so that a block's position is offset + (address - start)."""
    trace = ctx.rep.trace
    grow = ((trace.action == SEG_ALLOC) | (trace.action == SEG_MAP)) & (trace.addr < PSEUDO_BASE)
    segs = [s for s in ctx.snapshot.segments if s.device == ctx.device
            and s.address != PSEUDO_BASE]
    starts = np.concatenate([np.asarray([s.address for s in segs], np.int64), trace.addr[grow],
                             ctx.rep.blocks.addr])
    ends = np.concatenate([np.asarray([s.address + s.total_size for s in segs], np.int64),
                           trace.addr[grow] + trace.size[grow],
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


def _index(values: np.ndarray, labels: dict[int, str]) -> tuple[np.ndarray, list[str]]:
    """Small-integer codes for a column of ids, and the label of each code."""
    unique, inverse = np.unique(values, return_inverse=True)
    return inverse.ravel().astype(np.int32), [labels.get(int(v), str(int(v))) for v in unique]


def block_columns(ctx: DeviceContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every block as packed columns, and the lookup tables the columns index."""
    blocks, trace = ctx.rep.blocks, ctx.rep.trace
    rows = np.arange(len(blocks))
    starts, _, offsets = address_space(ctx)
    where = np.clip(np.searchsorted(starts, blocks.addr, side="right") - 1, 0, None)
    y = (offsets[where] + blocks.addr - starts[where]) if len(starts) else blocks.addr * 0
    unique_streams, streams = np.unique(blocks.stream, return_inverse=True)
    columns = {
        "alloc": blocks.alloc.astype(np.int32), "freq": blocks.free_requested.astype(np.int32),
        "free": blocks.free.astype(np.int32), "size": blocks.size.astype(np.float64),
        "req": blocks.requested.astype(np.float64), "addr": blocks.addr.astype(np.float64),
        "y": y.astype(np.float64), "stack": blocks.stack.astype(np.int32),
        "state": blocks.state.astype(np.int8), "stream": streams.ravel().astype(np.int32),
        "flags": server_flags(ctx),
    }
    tables: dict[str, Any] = {"streams": [hex(int(s)) for s in unique_streams]}
    if trace.operator is not None:
        columns["op"] = block_column(ctx, rows, trace.operator).astype(np.int32)
        tables["operators"] = ctx.snapshot.operators
    if trace.thread is not None:
        thread = block_column(ctx, rows, trace.thread)
        process = block_column(ctx, rows, trace.process)
        keys = np.where(thread >= 0, process * (1 << 32) + thread, -1)
        labels = {int(k): f"{int(p)}/{int(t)}" for k, p, t in zip(keys, process, thread)
                  if k >= 0}
        columns["thread"], tables["threads"] = _index(keys, {-1: "", **labels})
    if trace.allocation_id is not None:
        columns["allocid"] = block_column(ctx, rows, trace.allocation_id).astype(np.float64)
    _access_columns(ctx, columns, tables)
    return {name: packed(values) for name, values in columns.items()}, tables


def _access_columns(ctx: DeviceContext, columns: dict[str, np.ndarray],
                    tables: dict[str, Any]) -> None:
    """msMemScope owners and accesses, per block (NaN / -1 where there are none)."""
    blocks = ctx.rep.blocks
    owners = {a: o for (d, a), o in ctx.snapshot.owners.items() if d == ctx.device}
    accesses = {a: x for (d, a), x in ctx.snapshot.accesses.items() if d == ctx.device}
    if owners:
        labels = sorted(set(owners.values()))
        code = {label: i for i, label in enumerate(labels)}
        columns["owner"] = np.asarray([code[owners[a]] if a in owners else -1
                                       for a in blocks.alloc.tolist()], np.int32)
        tables["owners"] = labels
    if accesses:
        found = [accesses.get(a) for a in blocks.alloc.tolist()]
        for position, name in enumerate(("first", "last", "gap", "count")):
            columns[f"access_{name}"] = np.asarray(
                [np.nan if x is None else x[position] for x in found], np.float64)
        times = ctx.rep.times
        columns["time_alloc"] = np.where(blocks.alloc >= 0, times[np.maximum(blocks.alloc, 0)],
                                         np.nan).astype(np.float64)
        columns["time_free"] = np.where(blocks.free >= 0, times[np.maximum(blocks.free, 0)],
                                        float(times[-1]) if len(times) else np.nan
                                        ).astype(np.float64)


def server_flags(ctx: DeviceContext) -> np.ndarray:
    """Bit mask per block of the idle kinds the snapshot analysis found (MEM005)."""
    flags = np.zeros(len(ctx.rep.blocks), np.int8)
    found = ctx.facts.get("idle_flags", {})
    rows = found.get(HELD_KIND)
    if rows is not None and len(rows):
        flags[rows] |= FLAG_HELD
    return flags


def stacks_payload(ctx: DeviceContext) -> dict[str, Any]:
    """Frames of every stack the blocks use, as a string table and per stack its frame ids,
    outermost first; plus the site of each stack."""
    used = np.unique(ctx.rep.blocks.stack)
    frame_ids: dict[str, int] = {}
    stacks: dict[str, Any] = {}
    for stack in used.tolist():
        if stack < 0:
            continue
        frames = format_stack(ctx.snapshot.stacks[stack], limit=1 << 16)[-MAX_FRAMES:]
        ids = [frame_ids.setdefault(f, len(frame_ids)) for f in frames]
        stacks[str(stack)] = [ctx.sites.site(stack), ids, ctx.sites.category(stack)]
    return {"frames": list(frame_ids), "stacks": stacks}


def events_payload(ctx: DeviceContext) -> dict[str, Any]:
    """The events no block row describes (segments, OOMs, markers), and the final segments."""
    trace = ctx.rep.trace
    block_events = (trace.action == ALLOC) | (trace.action == FREE_REQ) | (
        trace.action == FREE_DONE)
    other = np.flatnonzero(~block_events)
    streams = sorted({int(s) for s in trace.stream[other].tolist()}
                     | {s.stream for s in ctx.snapshot.segments if s.device == ctx.device})
    code = {s: i for i, s in enumerate(streams)}
    events = [[int(e), int(trace.action[e]), float(trace.addr[e]), hex(int(trace.addr[e])),
               int(trace.size[e]), code[int(trace.stream[e])], int(trace.stack[e])]
              for e in other.tolist()]
    final = [[float(s.address), hex(s.address), s.total_size, code[s.stream], s.is_expandable,
              s.address == PSEUDO_BASE]
             for s in ctx.snapshot.segments if s.device == ctx.device]
    return {"other": events, "final_segments": final,
            "segment_streams": [hex(s) for s in streams],
            "segment_actions": [ACTIONS[a] for a in SEGMENT_ACTIONS], "pseudo": float(PSEUDO_BASE)}


def device_payload(ctx: DeviceContext) -> dict[str, Any]:
    rep = ctx.rep
    columns, tables = block_columns(ctx)
    starts, ends, offsets = address_space(ctx)
    return {
        "device": ctx.device, "events": rep.n_events, "has_time": rep.trace.time_us is not None,
        "peak": {"event": rep.peak_index, "bytes": rep.peak_bytes, "exact": rep.initial_known},
        "initial": list(rep.initial), "final": list(rep.final),
        "counted": rep.blocks.event_size_key,
        "ooms": np.flatnonzero(rep.trace.action == OOM).tolist()[:100],
        "series": series_payload(ctx),
        "steps": ctx.steps.starts[:MAX_STEPS], "step_count": len(ctx.steps),
        "step_source": ctx.steps.source, "marks": ctx.marks,
        "blocks_total": len(rep.blocks),
        "space": {"starts": starts.astype(np.float64).tolist(),
                  "offsets": offsets.astype(np.float64).tolist(),
                  "total": float(offsets[-1] + ends[-1] - starts[-1]) if len(starts) else 0.0},
        "columns": columns, "tables": tables, "stacks": stacks_payload(ctx),
        "actions": list(ACTIONS), "events_other": events_payload(ctx),
    }

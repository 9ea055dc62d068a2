"""Event view and block view: filterable rows, printable as tables, exportable as CSV/JSON."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Table
from npu_migrate.memory.context import Bytes, DeviceContext
from npu_migrate.memory.model import ACTIONS, CODE
from npu_migrate.memory.replay import STATE_NAMES

EVENT_COLUMNS = ["id", "action", "address", "size", "stream", "allocated", "active", "reserved",
                 "time_us", "call_stack"]
BLOCK_COLUMNS = ["id", "requested_size", "size", "address", "state", "alloc_event",
                 "free_requested_event", "free_event", "stream", "call_stack"]
BYTE_COLUMNS = ("size", "requested_size", "allocated", "active", "reserved")
UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
         "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_size(text: str | None) -> int | None:
    """'4096', '512K', '1.5MiB', '2G' -> bytes (binary units)."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 4096, 512K, 1.5MiB, 2G)")
    return int(float(match.group(1)) * UNITS[match.group(2).lower()])


def event_range(ctx: DeviceContext, start: int | None, end: int | None,
                since_s: float | None, until_s: float | None) -> tuple[int, int]:
    """[lo, hi) in event indices from event ids and/or seconds since the first event."""
    for name, value in (("--since", since_s), ("--until", until_s)):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{name} {value}: give a number of seconds")
    n = ctx.rep.n_events
    lo, hi = max(start or 0, 0), n if end is None else min(end + 1, n)
    times = ctx.rep.trace.time_us
    if times is not None and (since_s is not None or until_s is not None):
        rel = (times - times[0]) / 1e6 if n else times
        if since_s is not None:
            lo = max(lo, int(np.searchsorted(rel, since_s, side="left")))
        if until_s is not None:
            hi = min(hi, int(np.searchsorted(rel, until_s, side="right")))
    return lo, max(lo, hi)


def select_events(ctx: DeviceContext, lo: int, hi: int, min_size: int | None = None,
                  max_size: int | None = None, actions: Iterable[str] = ()) -> np.ndarray:
    trace = ctx.rep.trace
    mask = np.zeros(ctx.rep.n_events, bool)
    mask[lo:hi] = True
    if min_size is not None:
        mask &= trace.size >= min_size
    if max_size is not None:
        mask &= trace.size <= max_size
    wanted = [CODE[a] for a in actions if a in CODE]
    if wanted:
        mask &= np.isin(trace.action, wanted)
    return np.flatnonzero(mask)


def event_records(ctx: DeviceContext, ids: np.ndarray, full_stack: bool) -> list[dict[str, Any]]:
    rep, trace = ctx.rep, ctx.rep.trace
    out = []
    for i in ids.tolist():
        stack = int(trace.stack[i])
        out.append({
            "id": i, "action": ACTIONS[trace.action[i]], "address": hex(int(trace.addr[i])),
            "size": int(trace.size[i]), "stream": hex(int(trace.stream[i])),
            "allocated": int(rep.allocated[i]), "active": int(rep.active[i]),
            "reserved": int(rep.reserved[i]),
            "time_us": int(trace.time_us[i]) if trace.time_us is not None else None,
            "call_stack": _stack_text(ctx, stack, full_stack)})
    return out


def select_blocks(ctx: DeviceContext, lo: int, hi: int, min_size: int | None = None,
                  max_size: int | None = None, states: Iterable[str] = ()) -> np.ndarray:
    """Blocks alive at some point of [lo, hi)."""
    blocks = ctx.rep.blocks
    ends = np.where(blocks.free < 0, ctx.rep.n_events, blocks.free)
    mask = (blocks.alloc < hi) & (ends >= lo)
    if min_size is not None:
        mask &= blocks.size >= min_size
    if max_size is not None:
        mask &= blocks.size <= max_size
    wanted = [code for code, name in STATE_NAMES.items() if name in set(states)]
    if wanted:
        mask &= np.isin(blocks.state, wanted)
    return np.flatnonzero(mask)


def block_records(ctx: DeviceContext, rows: np.ndarray, full_stack: bool) -> list[dict[str, Any]]:
    b = ctx.rep.blocks
    return [{"id": r, "requested_size": int(b.requested[r]), "size": int(b.size[r]),
             "address": hex(int(b.addr[r])), "state": STATE_NAMES[int(b.state[r])],
             "alloc_event": int(b.alloc[r]),
             "free_requested_event": int(max(b.free_requested[r], -1)),
             "free_event": int(b.free[r]), "stream": hex(int(b.stream[r])),
             "call_stack": _stack_text(ctx, int(b.stack[r]), full_stack)}
            for r in rows.tolist()]


def _stack_text(ctx: DeviceContext, stack: int, full: bool) -> str:
    return ctx.sites.full(stack) if full else ctx.sites.site(stack)


def as_table(title: str, columns: list[str], records: list[dict[str, Any]]) -> Table:
    def show(key: str, value: Any) -> Any:
        if key in BYTE_COLUMNS and value is not None:
            return Bytes(value)
        return value

    return Table(title, columns, [[show(c, r[c]) for c in columns] for r in records])


def export(records: list[dict[str, Any]], columns: list[str], path: str) -> None:
    try:
        _export(records, columns, path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write the export: {exc.strerror or exc}") from None


def _export(records: list[dict[str, Any]], columns: list[str], path: str) -> None:
    if path.endswith(".json"):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(records, handle, separators=(",", ":"))
        return
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(records)

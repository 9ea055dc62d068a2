"""The allocator pool (segments and the blocks in them) as it was after any event.

Segments are rebuilt by undoing the segment events after that event from the final state;
live blocks come from the block table. Each query costs O(blocks + later segment events).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npu_migrate.memory.model import (
    PSEUDO_BASE,
    SEG_ALLOC,
    SEG_FREE,
    SEG_MAP,
    SEG_UNMAP,
    Snapshot,
)
from npu_migrate.memory.replay import Replay


@dataclass
class SegmentState:
    address: int
    size: int
    stream: int
    expandable: bool
    pool_id: tuple = (0, 0)
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # block rows inside
    used: int = 0
    largest_gap: int = 0
    gaps: int = 0

    @property
    def free(self) -> int:
        return self.size - self.used


@dataclass
class PoolState:
    """Segments and their blocks after an event. `free` is the one definition of free memory
    every view uses (this, the fragmentation finding, the HTML pool view): reserved bytes minus
    the bytes of blocks in use or pending free, per segment."""

    event: int
    segments: list[SegmentState]

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def free(self) -> int:
        return sum(s.free for s in self.segments)

    @property
    def largest_gap(self) -> int:
        return max((s.largest_gap for s in self.segments), default=0)


def pool_at(snapshot: Snapshot, rep: Replay, event: int) -> PoolState:
    """The pool after `event` (-1: before the first recorded event)."""
    ranges: list[list[Any]] = [
        [s.address, s.address + s.total_size, s.stream, s.is_expandable, s.pool_id]
        for s in snapshot.segments if s.device == rep.device]
    trace = rep.trace
    act = trace.action
    later = np.flatnonzero(((act == SEG_ALLOC) | (act == SEG_FREE) | (act == SEG_MAP)
                            | (act == SEG_UNMAP)) & (np.arange(len(act)) > event))
    for k in later[::-1]:
        kind, start = int(act[k]), int(trace.addr[k])
        end = start + int(trace.size[k])
        if kind in (SEG_ALLOC, SEG_MAP):
            ranges = _subtract(ranges, start, end)
        else:
            ranges.append([start, end, int(trace.stream[k]), kind == SEG_UNMAP, (0, 0)])
            if kind == SEG_UNMAP:
                ranges = _merge_expandable(ranges)
    ranges.sort(key=lambda r: r[0])
    return PoolState(event, _place_blocks(rep, event, ranges))


def _subtract(ranges: list[list], start: int, end: int) -> list[list]:
    out = []
    for r in ranges:
        if r[1] <= start or r[0] >= end:
            out.append(r)
            continue
        if r[0] < start:
            out.append([r[0], start] + r[2:])
        if r[1] > end:
            out.append([end, r[1]] + r[2:])
    return out


def _merge_expandable(ranges: list[list]) -> list[list]:
    ranges.sort(key=lambda r: r[0])
    out: list[list] = []
    for r in ranges:
        if out and r[3] and out[-1][3] and out[-1][1] == r[0] and out[-1][2] == r[2]:
            out[-1][1] = r[1]
        else:
            out.append(r)
    return out


def _place_blocks(rep: Replay, event: int, ranges: list[list]) -> list[SegmentState]:
    blocks = rep.blocks
    rows = np.flatnonzero(blocks.active_at(event))
    rows = rows[np.argsort(blocks.addr[rows], kind="stable")]
    addrs, sizes = blocks.addr[rows], blocks.size[rows]
    states = []
    placed = np.zeros(len(rows), bool)
    for start, end, stream, expandable, pool in ranges:
        if start == PSEUDO_BASE:
            continue  # filled last, with the blocks no real segment holds
        lo, hi = np.searchsorted(addrs, start), np.searchsorted(addrs, end)
        placed[lo:hi] = True
        seg = SegmentState(start, end - start, stream, expandable, pool, rows[lo:hi])
        inside_a, inside_s = addrs[lo:hi], sizes[lo:hi]
        seg.used = int(np.minimum(inside_s, end - inside_a).sum())
        edges_start = np.concatenate([[start], inside_a + inside_s])
        edges_end = np.concatenate([inside_a, [end]])
        gaps = edges_end - edges_start
        gaps = gaps[gaps > 0]
        seg.gaps = len(gaps)
        seg.largest_gap = int(gaps.max()) if len(gaps) else 0
        states.append(seg)
    for start, end, stream, expandable, pool in ranges:
        if start == PSEUDO_BASE:  # msMemScope pool totals: used is known, the layout is not
            seg = SegmentState(start, end - start, stream, expandable, pool, rows[~placed])
            seg.used = min(int(sizes[~placed].sum()), seg.size)
            seg.gaps = int(seg.free > 0)
            seg.largest_gap = seg.free
            states.append(seg)
    return sorted(states, key=lambda s: s.address)

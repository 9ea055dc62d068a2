"""Replay a device trace: running totals after every event and the table of blocks.

The trace may start mid-run (ring buffer), so totals are anchored on the exact final state in
`segments` and the starting state is the final one minus the sum of all event deltas; this is
the backward reconstruction MemoryViz and MindStudio do, done once in O(N) with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from npu_migrate.memory.model import (
    ACTIVE,
    ALLOC,
    FREE_DONE,
    FREE_REQ,
    PENDING,
    SEG_ALLOC,
    SEG_FREE,
    SEG_MAP,
    SEG_UNMAP,
    DeviceTrace,
    Snapshot,
)

# final state of a block row
STATE_ACTIVE, STATE_PENDING, STATE_FREED = 0, 1, 2
BEFORE_WINDOW = -2  # free_requested of a block already pending when the window opened
STATE_NAMES = {STATE_ACTIVE: ACTIVE, STATE_PENDING: PENDING, STATE_FREED: "freed"}


@dataclass
class Blocks:
    """One row per block lifetime seen in the window or live at the end. Event ids are -1
    where the event lies outside the recorded window (before it for alloc, after for frees)."""

    addr: np.ndarray
    size: np.ndarray
    requested: np.ndarray
    alloc: np.ndarray  # event index of the alloc, -1 if before the window
    free_requested: np.ndarray  # -1 if never freed by the user in the window
    free: np.ndarray  # event index of free_completed, -1 if still held at the end
    stack: np.ndarray
    stream: np.ndarray
    state: np.ndarray  # final state: STATE_ACTIVE / STATE_PENDING / STATE_FREED
    # which final-block field the trace sizes match: "requested_size" (current producers) or
    # "size" (producers that log the rounded size)
    event_size_key: str = "requested_size"

    def __len__(self) -> int:
        return len(self.addr)

    @property
    def counted(self) -> np.ndarray:
        """The per-block bytes the running totals count (see `event_size_key`)."""
        return self.requested if self.event_size_key == "requested_size" else self.size

    def allocated_at(self, event: int) -> np.ndarray:
        """Mask of blocks held by the user (allocated, not yet freed) after `event`."""
        return ((self.alloc <= event)
                & ((self.free_requested == -1) | (self.free_requested > event))
                & ((self.free < 0) | (self.free > event)))

    def active_at(self, event: int) -> np.ndarray:
        """Mask of blocks occupying pool space (allocated or pending free) after `event`."""
        return (self.alloc <= event) & ((self.free < 0) | (self.free > event))


@dataclass
class Replay:
    device: int
    trace: DeviceTrace
    allocated: np.ndarray  # bytes after each event
    active: np.ndarray
    reserved: np.ndarray
    initial: tuple[int, int, int]  # allocated, active, reserved before the first event
    final: tuple[int, int, int]
    blocks: Blocks
    # whether the state before the first event is known exactly (from the dump-time segments);
    # when not, totals are the smallest ones consistent with the trace: the peak is a lower bound
    initial_known: bool = True

    @property
    def n_events(self) -> int:
        return len(self.trace)

    @cached_property
    def peak_index(self) -> int:
        """Event after which allocated memory is highest; -1 when it was highest before the
        first recorded event (a trace that starts with frees)."""
        return _peak(self.allocated, self.initial[0])

    @property
    def peak_bytes(self) -> int:
        return self.allocated_after(self.peak_index)

    @cached_property
    def peak_reserved_index(self) -> int:
        return _peak(self.reserved, self.initial[2])

    def allocated_after(self, event: int) -> int:
        return int(self.allocated[event]) if event >= 0 and self.n_events else self.initial[0]

    def reserved_after(self, event: int) -> int:
        return int(self.reserved[event]) if event >= 0 and self.n_events else self.initial[2]

    @property
    def times(self) -> np.ndarray:
        """Event times in µs, or event indices where the producer recorded none."""
        if self.trace.time_us is not None:
            return self.trace.time_us
        return np.arange(self.n_events, dtype=np.int64)

    def allocated_before(self, event: int) -> int:
        return int(self.allocated[event - 1]) if event > 0 else self.initial[0]


def _peak(series: np.ndarray, before: int) -> int:
    if not len(series):
        return -1
    best = int(np.argmax(series))
    return -1 if before > int(series[best]) else best


def final_totals(snapshot: Snapshot, device: int, key: str = "requested_size"
                 ) -> tuple[int, int, int]:
    """Totals of the dump-time state. Trace events carry the requested (unrounded) size, so
    by default blocks count with their requested size too and the replay balances exactly."""
    allocated = active = reserved = 0
    for seg in snapshot.segments:
        if seg.device != device:
            continue
        reserved += seg.total_size
        for block in seg.blocks:
            if block["state"] == ACTIVE:
                allocated += block[key]
                active += block[key]
            elif block["state"] == PENDING:
                active += block[key]
    return allocated, active, reserved


def replay(snapshot: Snapshot, device: int) -> Replay:
    trace = snapshot.trace(device)
    act, size = trace.action, trace.size
    d_alloc = np.where(act == ALLOC, size, 0) - np.where(act == FREE_REQ, size, 0)
    d_active = np.where(act == ALLOC, size, 0) - np.where(act == FREE_DONE, size, 0)
    grow = (act == SEG_ALLOC) | (act == SEG_MAP)
    shrink = (act == SEG_FREE) | (act == SEG_UNMAP)
    d_reserved = np.where(grow, size, 0) - np.where(shrink, size, 0)
    blocks = pair_blocks(snapshot, device, trace)
    final = final_totals(snapshot, device, blocks.event_size_key)
    known = initial_state_known(snapshot, device, len(trace))
    series, initial = [], []
    for delta, end in zip((d_alloc, d_active, d_reserved), final):
        running = np.cumsum(delta, dtype=np.int64)
        start = end - (int(running[-1]) if len(running) else 0)
        lowest = int(running.min()) if len(running) else 0
        if start + min(lowest, 0) < 0:  # the final state misses blocks: bound it from below
            start, known = -min(lowest, 0), False
        series.append(running + start)
        initial.append(int(start))
    return Replay(device, trace, series[0], series[1], series[2],
                  (initial[0], initial[1], initial[2]), final, blocks, known)


def initial_state_known(snapshot: Snapshot, device: int, n_events: int) -> bool:
    """The state before the first event is exact when the dump-time segments are recorded:
    msMemScope rows and traces without segments cannot tell what was held before."""
    if snapshot.producer == "msmemscope":
        return False
    return not n_events or any(s.device == device for s in snapshot.segments)


def pair_blocks(snapshot: Snapshot, device: int, trace: DeviceTrace) -> Blocks:
    """Pair each alloc with the free_requested/free_completed that follow it at the same
    address, vectorised by sorting block events by (address, event index)."""
    act = trace.action
    idx = np.flatnonzero((act == ALLOC) | (act == FREE_REQ) | (act == FREE_DONE))
    order = np.lexsort((idx, trace.addr[idx]))
    pos, kind, addr = idx[order], act[idx][order], trace.addr[idx][order]
    n = len(pos)

    def follows(offset: int, wanted: int) -> np.ndarray:
        """For every row j: does row j+offset have the same address and action `wanted`?"""
        out = np.zeros(n, bool)
        if n > offset:
            out[:n - offset] = (addr[offset:] == addr[:n - offset]) & (kind[offset:] == wanted)
        return out

    def preceded(offset: int, wanted: int) -> np.ndarray:
        out = np.zeros(n, bool)
        if n > offset:
            out[offset:] = (addr[:n - offset] == addr[offset:]) & (kind[:n - offset] == wanted)
        return out

    is_alloc, is_req, is_done = kind == ALLOC, kind == FREE_REQ, kind == FREE_DONE
    req_next = is_alloc & follows(1, FREE_REQ)
    done_after_req = req_next & follows(2, FREE_DONE)
    done_next = is_alloc & follows(1, FREE_DONE)  # free_completed with no request (rare)
    rows_alloc = np.flatnonzero(is_alloc)
    alloc_ev = pos[rows_alloc]
    req_ev = np.where(req_next[rows_alloc], _shifted(pos, 1)[rows_alloc], -1)
    free_ev = np.where(done_after_req[rows_alloc], _shifted(pos, 2)[rows_alloc],
                       np.where(done_next[rows_alloc], _shifted(pos, 1)[rows_alloc], -1))
    # frees whose alloc happened before the window
    orphan_req = is_req & ~preceded(1, ALLOC)
    orphan_done = is_done & ~preceded(1, FREE_REQ) & ~preceded(1, ALLOC)
    orphan_done_after_req = orphan_req & follows(1, FREE_DONE)
    rows_oreq, rows_odone = np.flatnonzero(orphan_req), np.flatnonzero(orphan_done)
    pre_alloc = np.full(len(rows_oreq) + len(rows_odone), -1, np.int64)
    # a free_completed alone: its free_requested came before the window
    pre_req = np.concatenate([pos[rows_oreq], np.full(len(rows_odone), BEFORE_WINDOW, np.int64)])
    pre_free = np.concatenate([np.where(orphan_done_after_req[rows_oreq],
                                        _shifted(pos, 1)[rows_oreq], -1), pos[rows_odone]])
    pre_events = np.concatenate([pos[rows_oreq], pos[rows_odone]])

    alloc = np.concatenate([alloc_ev, pre_alloc])
    free_requested = np.concatenate([req_ev, pre_req])
    free = np.concatenate([free_ev, pre_free])
    source = np.concatenate([alloc_ev, pre_events])  # the event that describes each row
    addr_col = trace.addr[source].astype(np.int64)
    size_col = trace.size[source].astype(np.int64)
    stack_col = trace.stack[source].astype(np.int32)
    stream_col = trace.stream[source].astype(np.int64)
    state = np.where(free >= 0, STATE_FREED, np.where(free_requested >= 0, STATE_PENDING,
                                                      STATE_ACTIVE)).astype(np.int8)
    requested = size_col.copy()
    ghosts, key = _match_final_state(snapshot, device, addr_col, state, size_col, requested,
                                     stack_col)
    if ghosts:
        g = np.array(ghosts, dtype=np.int64).reshape(-1, 6)
        minus = np.full(len(g), -1, np.int64)
        addr_col = np.concatenate([addr_col, g[:, 0]])
        size_col = np.concatenate([size_col, g[:, 1]])
        requested = np.concatenate([requested, g[:, 2]])
        stack_col = np.concatenate([stack_col, g[:, 3].astype(np.int32)])
        stream_col = np.concatenate([stream_col, g[:, 4]])
        state = np.concatenate([state, g[:, 5].astype(np.int8)])
        alloc, free = np.concatenate([alloc, minus]), np.concatenate([free, minus])
        # a pending ghost was freed by the user before the window
        pending = np.where(g[:, 5] == STATE_PENDING, BEFORE_WINDOW, -1)
        free_requested = np.concatenate([free_requested, pending])
    order = np.lexsort((addr_col, np.where(alloc < 0, -1, alloc)))
    return Blocks(addr_col[order], size_col[order], requested[order], alloc[order],
                  free_requested[order], free[order], stack_col[order], stream_col[order],
                  state[order], key)


def _shifted(values: np.ndarray, offset: int) -> np.ndarray:
    out = np.full(len(values), -1, np.int64)
    if len(values) > offset:
        out[:-offset] = values[offset:]
    return out


def _match_final_state(snapshot: Snapshot, device: int, addr: np.ndarray, state: np.ndarray,
                       size: np.ndarray, requested: np.ndarray, stack: np.ndarray
                       ) -> tuple[list[tuple[int, ...]], str]:
    """Copy block sizes and stacks from the final segments onto the open rows; return the
    live blocks that no recorded alloc explains (allocated before the window: ghost blocks)
    and which final field the event sizes match."""
    votes = {"requested_size": 0, "size": 0}
    open_rows = {int(a): i for i, a in zip(np.flatnonzero(state != STATE_FREED),
                                           addr[state != STATE_FREED])}
    ghosts: list[tuple[int, ...]] = []
    for seg in snapshot.segments:
        if seg.device != device:
            continue
        for block in seg.blocks:
            if block["state"] not in (ACTIVE, PENDING):
                continue
            row = open_rows.pop(block["address"], None)
            if row is not None:
                if block["size"] != block["requested_size"]:
                    if size[row] == block["size"]:
                        votes["size"] += 1
                    elif size[row] == block["requested_size"]:
                        votes["requested_size"] += 1
                size[row], requested[row] = block["size"], block["requested_size"]
                if stack[row] < 0:
                    stack[row] = block["stack"]
                continue
            final = STATE_PENDING if block["state"] == PENDING else STATE_ACTIVE
            ghosts.append((block["address"], block["size"], block["requested_size"],
                           block["stack"], seg.stream, final))
    key = "size" if votes["size"] > votes["requested_size"] else "requested_size"
    return ghosts, key

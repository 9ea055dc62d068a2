"""Training-step boundaries, as event indices of one device trace.

Sources, tried in order: a user pattern (`--step-frame`), `external_annotations`
(ProfilerStep#N, then optimizer zero_grad/step, then DataLoader fetches), and a repeating
allocation pattern: the call stack that allocates once per step at regular intervals.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from npu_migrate.memory.model import ALLOC, Snapshot
from npu_migrate.memory.replay import Replay
from npu_migrate.memory.sites import site_of

# (name pattern, stage): annotation families that mark one step each, most specific first
ANNOTATION_MARKERS = (
    (re.compile(r"^ProfilerStep#\d+"), "START"),
    (re.compile(r"^Optimizer\.zero_grad#"), "START"),
    (re.compile(r"^Optimizer\.step#"), "END"),
    (re.compile(r"^enumerate\(DataLoader\)#"), "START"),
)
MAX_GAP_RATIO = 1.5  # a pattern is regular when its longest gap is at most 1.5x its shortest


@dataclass
class Steps:
    starts: list[int]  # event index where each step begins
    source: str  # how they were found

    def __len__(self) -> int:
        return len(self.starts)

    def step_of(self, events: np.ndarray) -> np.ndarray:
        """Step number of each event index (-1: before the first step)."""
        return np.searchsorted(np.asarray(self.starts, np.int64), events, side="right") - 1

    def bounds(self, step: int, n_events: int) -> tuple[int, int]:
        end = self.starts[step + 1] if step + 1 < len(self.starts) else n_events
        return self.starts[step], end


def find_steps(snapshot: Snapshot, rep: Replay, frame_pattern: str | None = None) -> Steps:
    if frame_pattern:
        found = _from_frames(snapshot, rep, re.compile(frame_pattern))
        return Steps(found, f"allocations whose stack matches {frame_pattern!r}")
    if rep.trace.time_us is not None and snapshot.annotations:
        found = _from_annotations(snapshot, rep)
        if found:
            return found
    return _from_pattern(snapshot, rep)


def _from_annotations(snapshot: Snapshot, rep: Replay) -> Steps | None:
    times = rep.trace.time_us
    for pattern, stage in ANNOTATION_MARKERS:
        marks = sorted(int(a.get("time_us") or 0) for a in snapshot.annotations
                       if pattern.search(str(a.get("name", ""))) and a.get("stage") == stage
                       and a.get("device", rep.device) in (rep.device, -1, None))
        if len(marks) < 2:
            continue
        starts = sorted(set(int(i) for i in np.searchsorted(times, marks, side="left")))
        starts = [s for s in starts if s < rep.n_events]
        if len(starts) >= 2:
            label = pattern.pattern.strip("^").split("#")[0].replace("\\", "")
            return Steps(starts, f"external_annotations {label} ({stage})")
    return None


def _from_frames(snapshot: Snapshot, rep: Replay, pattern: re.Pattern) -> list[int]:
    matching = {i for i, stack in enumerate(snapshot.stacks)
                if any(pattern.search(f"{f[1]}:{f[2]} {f[0]}") for f in stack)}
    if not matching:
        return []
    trace = rep.trace
    hits = np.flatnonzero((trace.action == ALLOC) & np.isin(trace.stack, list(matching)))
    return [int(i) for i in hits]


def _from_pattern(snapshot: Snapshot, rep: Replay) -> Steps:
    """Stacks allocated exactly once per step recur at near-constant spacing; the most common
    recurrence count among such regular stacks is the step count, and the regular stack seen
    first gives the boundaries."""
    trace = rep.trace
    allocs = np.flatnonzero((trace.action == ALLOC) & (trace.stack >= 0))
    if len(allocs) < 6:
        return Steps([], "none found")
    stacks = trace.stack[allocs]
    order = np.argsort(stacks, kind="stable")
    sorted_stacks, sorted_pos = stacks[order], allocs[order]
    cuts = np.flatnonzero(np.diff(sorted_stacks)) + 1
    regular: list[tuple[int, int]] = []  # (count, first position)
    groups: dict[tuple[int, int], np.ndarray] = {}
    for positions in np.split(sorted_pos, cuts):
        if len(positions) < 3:
            continue
        gaps = np.diff(positions)
        # regular, and spread over the trace (not a burst of look-alike allocations)
        if (gaps.min() * len(positions) * 2 >= rep.n_events
                and gaps.max() <= MAX_GAP_RATIO * gaps.min()):
            key = (len(positions), int(positions[0]))
            regular.append(key)
            groups[key] = positions
    if not regular:
        return Steps([], "none found")
    counts = Counter(count for count, _ in regular)
    best_count = max(counts, key=lambda c: (counts[c], -c))
    anchor = min(key for key in regular if key[0] == best_count)
    site = site_of(snapshot.stacks[int(trace.stack[anchor[1]])])
    return Steps([int(p) for p in groups[anchor]],
                 f"repeating allocation pattern ({site}, {best_count} times)")

"""Training-step boundaries, as event indices of one device trace, from evidence only.

Evidence, tried in order (the first that gives two or more boundaries wins):

1. `--step-frame REGEX`: each run of allocations whose stack has a frame matching the regex
   (frames read `file:line function`) starts a step;
2. markers the producer recorded: MSTX marks / range starts (msMemScope), `ProfilerStep#N`
   (torch.profiler with a schedule), then the record_function annotations of a whole
   iteration (`Optimizer.zero_grad`, the end of `Optimizer.step`, DataLoader fetches);
3. a repeat of the whole iteration seen in the call stacks: runs of allocations made inside
   `optimizer.step()` (a step ends where the run ends), then inside `zero_grad`, then inside
   a DataLoader fetch (a step starts where the run starts).

A repeating stack alone is never evidence: the 32 layers of one forward pass repeat too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from npu_migrate.memory.model import ALLOC, FREE_REQ, Snapshot
from npu_migrate.memory.replay import Replay

# (name pattern, stage): annotation families that mark one step each, most specific first
# (tests/rules checks that the inserted ProfilerStep markers match the first one)
ANNOTATION_MARKERS = (
    (re.compile(r"^ProfilerStep#\d+"), "START"),
    (re.compile(r"^Optimizer\.zero_grad#"), "START"),
    (re.compile(r"^Optimizer\.step#"), "END"),
    (re.compile(r"^enumerate\(DataLoader\)#"), "START"),
)
MARKER_EVIDENCE = ("profiler ProfilerStep#N annotations", "Optimizer.zero_grad annotations",
                   "Optimizer.step annotations (their ends)", "DataLoader fetch annotations")
# (file regex, function regex, boundary at the run's "start" or "end", evidence label)
ITERATION_FRAMES = (
    (re.compile(r"(^|/)(torch|torch_npu)/optim/(?!lr_scheduler)[^/]+\.py$"),
     re.compile(r"^(step|_use_grad|wrapper)$"), "end", "optimizer.step() frames"),
    (re.compile(r"(^|/)(torch|torch_npu)/optim/[^/]+\.py$"), re.compile(r"^zero_grad$"),
     "start", "zero_grad() frames"),
    (re.compile(r"(^|/)torch/utils/data/dataloader\.py$"), re.compile(r"^__next__$"),
     "start", "DataLoader fetch frames"),
)
EXAMPLE_STEP_FRAME = r"optim/[a-z_]+\.py:\d+ step$"  # documented in docs/memory.md


@dataclass
class Steps:
    starts: list[int]  # event index where each step begins
    source: str  # the evidence, in words (printed with every finding that uses steps)

    def __len__(self) -> int:
        return len(self.starts)

    def step_of(self, events: np.ndarray) -> np.ndarray:
        """Step number of each event index (-1: before the first step)."""
        return np.searchsorted(np.asarray(self.starts, np.int64), events, side="right") - 1

    def bounds(self, step: int, n_events: int) -> tuple[int, int]:
        end = self.starts[step + 1] if step + 1 < len(self.starts) else n_events
        return self.starts[step], end


def no_steps(why: str) -> Steps:
    return Steps([], f"none ({why})")


def find_steps(snapshot: Snapshot, rep: Replay, frame_pattern: str | None = None) -> Steps:
    if frame_pattern:
        try:
            pattern = re.compile(frame_pattern)
        except re.error as exc:
            raise ValueError(f"--step-frame: not a valid regex: {exc}") from None
        runs = frame_runs(snapshot, rep, lambda f: bool(pattern.search(f"{f[1]}:{f[2]} {f[0]}")))
        starts = [s for s, _ in runs]
        if len(starts) >= 2:
            return Steps(starts, f"--step-frame '{frame_pattern}' ({len(starts)} runs)")
        return no_steps(f"--step-frame '{frame_pattern}' matched {len(starts)} run(s) of "
                        "allocations; two are needed")
    if rep.trace.time_us is not None and snapshot.annotations:
        found = _from_annotations(snapshot, rep)
        if found:
            return found
    for file_re, name_re, edge, label in ITERATION_FRAMES:
        runs = frame_runs(snapshot, rep, lambda f, file_re=file_re, name_re=name_re: bool(
            file_re.search(f[1]) and name_re.search(f[0])))
        if len(runs) >= 2:
            if edge == "end":  # the iteration after the last run is usually cut by the dump
                starts = sorted({0} | {end for _, end in runs if end < rep.n_events})
            else:
                starts = [s for s, _ in runs]
            return Steps(starts, f"{label} repeat {len(runs)} times")
    return no_steps("no step markers, profiler annotations or repeated optimizer/zero_grad/"
                    "DataLoader frames")


def _from_annotations(snapshot: Snapshot, rep: Replay) -> Steps | None:
    times = rep.trace.time_us
    if times is None:
        return None
    mstx = [a for a in snapshot.annotations if a.get("source") == "mstx"]
    if mstx:
        marks = sorted(int(a["time_us"]) for a in mstx
                       if a.get("device", rep.device) in (rep.device, -1, None))
        starts = _boundaries(times, marks, rep.n_events)
        if len(starts) >= 2:
            return Steps(starts, f"MSTX step markers ({len(marks)})")
    for (pattern, stage), label in zip(ANNOTATION_MARKERS, MARKER_EVIDENCE):
        marks = sorted(_time(a) for a in snapshot.annotations
                       if pattern.search(str(a.get("name", ""))) and a.get("stage") == stage
                       and a.get("device", rep.device) in (rep.device, -1, None))
        starts = _boundaries(times, marks, rep.n_events)
        if len(starts) >= 2:
            return Steps(starts, f"{label} ({len(marks)})")
    return None


def _time(annotation: dict) -> int:
    value = annotation.get("time_us")
    return int(value) if isinstance(value, (int, float)) and abs(value) < 2 ** 62 else 0


def _boundaries(times: np.ndarray, marks: list[int], n: int) -> list[int]:
    if len(marks) < 2:
        return []
    starts = sorted({int(i) for i in np.searchsorted(times, marks, side="left")})
    return [s for s in starts if s < n]


def frame_runs(snapshot: Snapshot, rep: Replay, matches) -> list[tuple[int, int]]:
    """(first event, event after the last) of each run of stack-carrying allocations and frees
    whose stack has a frame for which `matches(frame)` holds; events without a stack neither
    extend nor break a run."""
    matching = np.zeros(len(snapshot.stacks) + 1, bool)  # index -1 (no stack) -> last slot
    for i, stack in enumerate(snapshot.stacks):
        matching[i] = any(matches(f) for f in stack)
    if not matching.any():
        return []
    trace = rep.trace
    rows = np.flatnonzero(((trace.action == ALLOC) | (trace.action == FREE_REQ))
                          & (trace.stack >= 0))
    hit = matching[trace.stack[rows]]
    if not hit.any():
        return []
    edges = np.diff(np.concatenate([[False], hit, [False]]).astype(np.int8))
    first, after = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(rows[a]), int(rows[b - 1]) + 1) for a, b in zip(first, after)]

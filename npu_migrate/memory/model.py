"""The in-memory model of a snapshot: columnar per-device traces plus the final pool state.

Traces are numpy columns (one row per event) rather than a list of dicts, so a million events
fit in tens of megabytes and every total is a vectorised cumulative sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

# Action codes. Order matters only for display; every analysis uses the names below.
ACTIONS = (
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap", "oom", "snapshot", "workspace_snapshot", "annotate",
    "user_defined", "other",
)
CODE = {name: i for i, name in enumerate(ACTIONS)}
ALLOC, FREE_REQ, FREE_DONE = CODE["alloc"], CODE["free_requested"], CODE["free_completed"]
SEG_ALLOC, SEG_FREE = CODE["segment_alloc"], CODE["segment_free"]
SEG_MAP, SEG_UNMAP = CODE["segment_map"], CODE["segment_unmap"]
OOM, WORKSPACE = CODE["oom"], CODE["workspace_snapshot"]

# msMemScope imports: the pseudo segment whose size follows the pool's `total` attribute; its
# layout is unknown, so every live block outside a real segment counts as inside it
PSEUDO_BASE = 1 << 60

# Block states as emitted by the allocators; the docstring spelling is folded in by the loader.
ACTIVE, PENDING, INACTIVE = "active_allocated", "active_pending_free", "inactive"


class Access(NamedTuple):
    """The accesses msMemScope recorded for one block, times in µs."""

    first: int
    last: int
    max_gap: int
    number: int


@dataclass
class Segment:
    """One segment of the final (dump-time) pool state."""

    device: int
    address: int
    total_size: int
    stream: int
    segment_type: str
    pool_id: tuple[int, ...]
    is_expandable: bool
    blocks: list[dict[str, Any]]  # address, size, requested_size, state, stack (index)


@dataclass
class DeviceTrace:
    """The trace of one device as columns; `stack` indexes `Snapshot.stacks` (-1: none)."""

    device: int
    action: np.ndarray  # int8
    addr: np.ndarray  # int64 (device_free for oom events)
    size: np.ndarray  # int64
    stream: np.ndarray  # int64, raw stream handle
    time_us: np.ndarray | None  # int64, or None where the producer wrote no time (torch_npu)
    stack: np.ndarray  # int32
    workspace_heads: int = 0  # leading workspace_snapshot triples folded in by the loader
    # producer-given category per event (profile-made snapshots): index into
    # Snapshot.category_names, -1 where absent; None when no event has one
    category: np.ndarray | None = None
    # msMemScope only (None elsewhere): the operator open on the event's thread (index into
    # Snapshot.operators, -1: none), the process and thread that made the event, and the
    # producer's allocation id (-1: none)
    operator: np.ndarray | None = None
    process: np.ndarray | None = None
    thread: np.ndarray | None = None
    allocation_id: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.action)


@dataclass
class Snapshot:
    """A loaded snapshot, whatever its producer (CUDA, torch_npu, msMemScope)."""

    path: str
    producer: str  # "cuda", "torch_npu", "cuda-legacy", "msmemscope"
    segments: list[Segment]
    traces: dict[int, DeviceTrace]
    stacks: list[tuple[tuple[str, str, int], ...]]  # (name, filename, line), innermost first
    allocator_settings: dict[str, Any] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # where the file contradicts itself (MEM009), found while loading
    inconsistencies: list[str] = field(default_factory=list)
    category_names: list[str] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)  # msMemScope ATEN/ATB operator names
    # msMemScope only: per block (device, alloc event) -> first access, last access, the
    # longest gap between accesses (all in µs) and the number of accesses
    accesses: dict[tuple[int, int], Access] = field(default_factory=dict)
    # msMemScope only: (device, alloc event) -> owner label (e.g. PTA@model@weight)
    owners: dict[tuple[int, int], str] = field(default_factory=dict)
    # the framework that made the memory: allocator advice is given in its terms
    # ("pytorch" for torch/torch_npu pickles, "mindspore" for MindSpore msMemScope rows)
    framework: str = "pytorch"

    @property
    def devices(self) -> list[int]:
        """Devices that have either a trace or segments, in order."""
        found = {d for d, t in self.traces.items() if len(t)} | {s.device for s in self.segments}
        return sorted(found)

    def trace(self, device: int) -> DeviceTrace:
        if device not in self.traces:
            self.traces[device] = empty_trace(device)
        return self.traces[device]


def empty_trace(device: int) -> DeviceTrace:
    i64 = np.zeros(0, dtype=np.int64)
    return DeviceTrace(device, np.zeros(0, np.int8), i64, i64.copy(), i64.copy(), None,
                       np.zeros(0, np.int32))

"""Memory statistics and snapshots for the emulated device.

On a CUDA backing the calls go to `torch.cuda`. On CPU there is no allocator with statistics, so the
device (`_tensor.wrap`) shows the tracker the backing tensor of every npu tensor it makes, and a
weakref finalizer on that tensor's storage object tells when the storage dies (torch keeps one
Python object per live storage). Host tensors are not device memory and are not counted. Live and peak
bytes follow; history entries and snapshots follow torch_npu's schema (memory_snapshot.md §1.8:
keys `segments` and `device_traces`, trace entries without `time_us`).
"""

from __future__ import annotations

import collections
import functools
import os
import pickle
import sys
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ._state import STATE

_ENABLED = (None, "state", "all")
_CONTEXT = (None, "state", "alloc", "all")
_STACKS = ("python", "all")


def _frames() -> list[dict[str, Any]]:
    own = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the tracker's and the device's frames
    return [{"filename": f.filename, "line": f.lineno or 0, "name": f.name}
            for f in reversed(traceback.extract_stack()) if not f.filename.startswith(own)]


class CpuMemoryTracker:
    """Counts bytes of live storages: the npu tensors' (the device's memory), or whatever storages a
    caller shows it (the verifier's CPU reference: every op output). A storage counts once, however
    many tensors view it, until torch releases it, also when a view outlived its base.

    `site_of` (optional, `() -> str | None`) names the line a new storage is attributed to when
    `see()` is given none: `by_site` then holds the live bytes per line, and `at_peak` a copy of it
    taken near the peak (one per 5% of growth, which keeps it cheap)."""

    def __init__(self, site_of: Callable[[], str | None] | None = None) -> None:
        self.allocated = 0
        self.peak = 0
        self.num_allocs = 0
        self.num_frees = 0
        # storage key -> (address, size, frames, site)
        self.live: dict[int, tuple[int, int, list, str | None]] = {}
        self._watch: dict[int, weakref.ref] = {}  # storage key -> the weak reference that reports its release
        self.history: collections.deque | None = None
        self.context: str | None = None
        self.site_of = site_of
        self.by_site: dict[str, int] = {}
        self.at_peak: dict[str, int] = {}
        self._snapshot_peak = 0

    def see(self, tensor: torch.Tensor, site: str | None = None) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other layouts without one storage
            return
        key = storage._cdata  # the storage itself, whichever Python object shows it
        if key in self.live:
            return
        size = storage.nbytes()
        frames = _frames() if self.context is not None else []  # "state", "alloc" or "all"
        if site is None and self.site_of is not None:
            site = self.site_of() or "<torch>"
        self.live[key] = (storage.data_ptr(), size, frames, site)
        # a weak reference calls back when torch releases the storage (cheaper than weakref.finalize,
        # which registers each storage for the interpreter's exit too)
        self._watch[key] = weakref.ref(storage, functools.partial(self._released, key))
        self.allocated += size
        self.num_allocs += 1
        if site is not None:
            self.by_site[site] = self.by_site.get(site, 0) + size
        if self.allocated > self.peak:
            self.peak = self.allocated
            if site is not None and self.peak > 1.05 * self._snapshot_peak:
                self.at_peak, self._snapshot_peak = dict(self.by_site), self.peak
        if self.history is not None:
            self.history.append(self._entry("alloc", key, frames if self.context in ("alloc", "all") else []))

    def moved(self, tensor: torch.Tensor) -> None:
        """`tensor` is copied to another device as a whole: its storage stops counting here (a
        tracker that counts host tensors, as the verifier's does, then counts the data once, as a
        run whose move is a no-op does)."""
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        if storage.nbytes() == tensor.numel() * tensor.element_size():
            self._free(storage._cdata)

    def _released(self, key: int, _reference: weakref.ref) -> None:
        self._free(key)

    def _free(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        if self.history is not None:
            frames = _frames() if self.context == "all" else []
            self.history.append(self._entry("free_requested", key, frames))
            self.history.append(self._entry("free_completed", key, frames))
        del self.live[key]
        self._watch.pop(key, None)
        self.allocated -= entry[1]
        self.num_frees += 1
        if entry[3] is not None:
            self.by_site[entry[3]] -= entry[1]

    def _entry(self, action: str, key: int, frames: list) -> dict[str, Any]:
        address, size, _, _ = self.live[key]
        return {"action": action, "addr": address, "size": size, "stream": 0, "pool_id": (0, 0),
                "frames": frames}

    def reset_peak(self) -> None:
        self.peak = self.allocated


class _Untracked(CpuMemoryTracker):
    """Stands in when activate(track_memory=False): every statistic stays 0."""

    def see(self, tensor: torch.Tensor, site: str | None = None) -> None:
        pass


_UNTRACKED = _Untracked()


def _tracker() -> CpuMemoryTracker | None:
    if STATE.backing != "cpu":
        return None
    return STATE.memory or _UNTRACKED


def memory_allocated(device: Any = None) -> int:
    t = _tracker()
    return t.allocated if t else torch.cuda.memory_allocated(device=_cuda_index(device))


def max_memory_allocated(device: Any = None) -> int:
    t = _tracker()
    return t.peak if t else torch.cuda.max_memory_allocated(device=_cuda_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    t = _tracker()
    if t:
        t.reset_peak()
    else:
        torch.cuda.reset_peak_memory_stats(device=_cuda_index(device))


def memory_stats(device: Any = None) -> dict[str, Any]:
    t = _tracker()
    if not t:
        return torch.cuda.memory_stats(device=_cuda_index(device))
    stats: dict[str, Any] = {}
    for kind in ("allocated_bytes", "active_bytes", "reserved_bytes", "requested_bytes"):
        stats[f"{kind}.all.current"] = t.allocated
        stats[f"{kind}.all.peak"] = t.peak
    stats["allocation.all.allocated"] = t.num_allocs
    stats["allocation.all.freed"] = t.num_frees
    stats["num_alloc_retries"] = 0
    stats["num_ooms"] = 0
    return stats


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    stats = memory_stats(device)
    return (f"npu-migrate emulated device: allocated {stats['allocated_bytes.all.current']} B, "
            f"peak {stats['allocated_bytes.all.peak']} B")


def _cuda_index(device: Any) -> Any:
    if device is None or isinstance(device, int):
        return device
    return torch.device(device).index


def _record_memory_history(enabled: str | None = "all", context: str | None = "all",
                           stacks: str = "all", max_entries: int = sys.maxsize,
                           device: Any = None) -> None:
    """torch_npu signature (torch_npu_api.md §2.2): no legacy bool form, `device` ignored."""
    if isinstance(enabled, bool) or enabled not in _ENABLED:
        raise TypeError(f"_record_memory_history(): enabled must be one of {_ENABLED}, got {enabled!r}")
    if context not in _CONTEXT:
        raise TypeError(f"_record_memory_history(): context must be one of {_CONTEXT}, got {context!r}")
    if stacks not in _STACKS:
        raise TypeError(f"_record_memory_history(): stacks must be one of {_STACKS}, got {stacks!r}")
    t = _tracker()
    if not t:
        # (checked against _ENABLED above: None, "state" or "all")
        torch.cuda.memory._record_memory_history(enabled, context=context, stacks=stacks,  # type: ignore[arg-type]
                                                 max_entries=max_entries)
        return
    if enabled is None:
        t.history, t.context = None, None
        return
    t.history = collections.deque(maxlen=1 if enabled == "state" else max_entries)
    t.context = context


def _snapshot(device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    t = _tracker()
    if not t:
        snap = torch.cuda.memory._snapshot()
        return {"segments": snap["segments"], "device_traces": snap["device_traces"]}
    segments = []
    for address, size, frames, _ in t.live.values():
        block = {"address": address, "size": size, "requested_size": size,
                 "state": "active_allocated", "frames": frames}
        segments.append({"device": 0, "address": address, "total_size": size, "allocated_size": size,
                         "active_size": size, "requested_size": size, "stream": 0,
                         "segment_type": "large" if size >= 1 << 20 else "small",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
                         "blocks": [block]})
    traces = list(t.history) if t.history is not None else []
    return {"segments": segments, "device_traces": [traces]}


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    with open(filename, "wb") as handle:
        pickle.dump(_snapshot(), handle, protocol=4)


def start_cpu_tracker() -> CpuMemoryTracker:
    tracker = CpuMemoryTracker()
    STATE.memory = tracker

    def stop() -> None:
        STATE.memory = None

    STATE.undo.append(stop)
    return tracker

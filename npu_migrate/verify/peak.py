"""Peak memory of a callable.

On an accelerator the device allocator's own statistics are used (reset before the run). On CPU,
the profiler's allocation events (`profile_memory=True`) give every tensor allocation and free of
the c10 CPU allocator; their running sum is the memory the run allocated, and the peak of it plus
the bytes already live at the start (parameters, buffers, the batch) is the peak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


def live_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            continue
        seen[storage.data_ptr() or id(storage)] = storage.nbytes()
    return sum(seen.values())


def _walk(nodes: Iterable[Any]) -> Iterable[Any]:
    for node in nodes:
        yield node
        yield from _walk(node.children)


def cpu_peak(run: Callable[[], Any], baseline: int = 0) -> dict[str, int]:
    """Run `run()` under the profiler; return the peak and the bytes still allocated at the end."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = []
    for node in _walk(prof.profiler.kineto_results.experimental_event_tree()):
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
    events.sort(key=lambda e: e[0])
    running = peak = 0
    for _, size in events:
        running += size
        peak = max(peak, running)
    return {"peak": baseline + peak, "end": baseline + running, "baseline": baseline,
            "events": len(events)}


def device_peak(run: Callable[[], Any], module: Any) -> dict[str, int]:
    """`module` is torch.cuda or torch.npu: both expose the same allocator statistics."""
    module.synchronize()
    module.reset_peak_memory_stats()
    baseline = module.memory_allocated()
    run()
    module.synchronize()
    return {"peak": module.max_memory_allocated(), "end": module.memory_allocated(),
            "baseline": baseline, "events": 0}

"""MEM009: an input that contradicts itself.

* the label (which allocator wrote it) against the content: a snapshot whose structure reads as
  torch_npu (no `time_us`, no `allocator_settings`) while its frames name CUDA code is a CUDA
  snapshot, and the other way round; the content wins and the finding says so;
* allocated memory above reserved memory: a pool cannot hand out more than it holds, so the
  reserved figures of that input (an msMemScope pool `total`, missing segment events) are
  incomplete, and so is anything judged from them (fragmentation, advice).
"""

from __future__ import annotations

import re

import numpy as np

from npu_migrate.core.diagnostics import Severity
from npu_migrate.memory.context import DeviceContext, fmt_bytes
from npu_migrate.memory.model import Snapshot

# frames only one of the two allocators' stacks hold (file and function, C++ or Python)
EVIDENCE = {
    "cuda": re.compile(r"c10::cuda|CUDACachingAllocator|at::cuda::|(^|[/\\])torch[/\\]cuda[/\\]"
                       r"|cudaMalloc|CUstream_st|_cuda\b|THPVariable_cuda"),
    "torch_npu": re.compile(r"torch_npu|c10_npu|NPUCachingAllocator|aclrt|at_npu::"),
}
NAMES = {"cuda": "CUDA", "torch_npu": "torch_npu"}


def content_producer(snapshot: Snapshot) -> tuple[str | None, str]:
    """Which allocator the frames name (None when neither or both), and a frame that shows it."""
    found: dict[str, str] = {}
    for stack in snapshot.stacks:
        for name, filename, _ in stack:
            text = f"{filename} {name}"
            for producer, pattern in EVIDENCE.items():
                if producer not in found and pattern.search(text):
                    found[producer] = f"{filename.rsplit('/', 1)[-1]} {name}".strip()[:120]
        if len(found) == len(EVIDENCE):
            return None, ""
    if len(found) == 1:
        producer, frame = next(iter(found.items()))
        return producer, frame
    return None, ""


def check_label(snapshot: Snapshot) -> None:
    """Relabel a snapshot whose frames contradict the label its structure suggests."""
    label = "cuda" if snapshot.producer.startswith("cuda") else snapshot.producer
    if label not in NAMES:
        return
    content, frame = content_producer(snapshot)
    if content is None or content == label:
        return
    snapshot.inconsistencies.append(
        f"labelled {NAMES[label]} by its structure ({_structure(snapshot)}) but its frames "
        f"name {NAMES[content]} code (e.g. '{frame}'): read as a {NAMES[content]} snapshot")
    snapshot.producer = content


def _structure(snapshot: Snapshot) -> str:
    if snapshot.producer == "torch_npu":
        return "no time_us and no allocator_settings, or torch_npu workspace entries"
    return "time_us or allocator_settings recorded"


def analyze_consistency(ctx: DeviceContext) -> None:
    """Allocated above reserved at any event (where reserved memory is recorded at all)."""
    rep = ctx.rep
    if rep.n_events == 0 or not rep.reserved.any():
        return
    over = rep.allocated - rep.reserved
    worst = int(np.argmax(over))
    if over[worst] <= 0:
        return
    first = int(np.argmax(over > 0))
    count = int((over > 0).sum())
    source = ("the pool 'total' of its MALLOC/FREE rows" if ctx.snapshot.producer == "msmemscope"
              else "its segment events and dump-time segments")
    ctx.add("MEM009", f"allocated memory exceeds reserved memory at {count} events, from "
            f"{ctx.when(first)}; worst at {ctx.when(worst)}: {fmt_bytes(rep.allocated[worst])} "
            f"allocated with {fmt_bytes(rep.reserved[worst])} reserved. A pool cannot hand out "
            f"more than it holds, so the reserved figures ({source}) are incomplete, and so are "
            "the fragmentation and allocator advice built on them", Severity.WARNING, worst,
            bytes=int(over[worst]))

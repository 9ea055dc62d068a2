"""Synthetic snapshots with a known story, for the benchmark and for the cases no real file has.

A small caching allocator is simulated: blocks are carved from segments, freed blocks go back
to a per-size free list and are only reused by requests of the same size, so varying
sequence lengths fragment the pool the way real ones fragment. A training loop allocates
parameters, per-layer activations and temporaries, gradients, optimizer state, and (if asked)
leaks one small block per step.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from typing import Any

MiB = 1 << 20
SEGMENT = 64 * MiB
STREAM = 0x5A5A0000
LEAK_BYTES = 32 * 1024  # a slow leak, e.g. losses.append(loss) without .item()


def _frames(*sites: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [{"name": n, "filename": f, "line": ln} for n, f, ln in sites]


TORCH = "/usr/lib/python3.11/site-packages/torch"
TRAIN = "/home/user/train.py"
STACKS = {
    "param": _frames(("convert", f"{TORCH}/nn/modules/module.py", 1341),
                     ("_apply", f"{TORCH}/nn/modules/module.py", 900), ("main", TRAIN, 20)),
    "act": _frames(("linear", f"{TORCH}/nn/functional.py", 100),
                   ("forward", f"{TORCH}/nn/modules/linear.py", 125),
                   ("_call_impl", f"{TORCH}/nn/modules/module.py", 1750),
                   ("train_step", TRAIN, 41)),
    "tmp": _frames(("gelu", f"{TORCH}/nn/functional.py", 200),
                   ("forward", f"{TORCH}/nn/modules/activation.py", 700),
                   ("train_step", TRAIN, 41)),
    "grad": _frames(("_engine_run_backward", f"{TORCH}/autograd/graph.py", 823),
                    ("backward", f"{TORCH}/autograd/__init__.py", 347),
                    ("backward", f"{TORCH}/_tensor.py", 581), ("train_step", TRAIN, 44)),
    "state": _frames(("_init_group", f"{TORCH}/optim/adam.py", 174),
                     ("step", f"{TORCH}/optim/adam.py", 234), ("train_step", TRAIN, 46)),
    "opt_tmp": _frames(("_multi_tensor_adam", f"{TORCH}/optim/adam.py", 703),
                       ("step", f"{TORCH}/optim/adam.py", 234), ("train_step", TRAIN, 46)),
    "output": _frames(("forward", f"{TORCH}/nn/modules/linear.py", 125), ("train_step", TRAIN, 42)),
    "leak": _frames(("train_step", TRAIN, 48), ("main", TRAIN, 60)),
}


class _Block:
    __slots__ = ("addr", "next", "prev", "seg", "size", "state")

    def __init__(self, addr: int, size: int, seg: _Segment):
        self.addr, self.size, self.state, self.seg = addr, size, "inactive", seg
        self.prev: _Block | None = None
        self.next: _Block | None = None


@dataclass
class _Segment:
    address: int
    size: int
    pool: tuple = (0, 0)
    head: _Block | None = None


class SimulatedAllocator:
    """Best-fit with splitting and coalescing over segments, like the caching allocator
    (without size classes or streams); records every event."""

    def __init__(self, events: list[dict], clock: list[int], with_time: bool):
        self.events, self.clock, self.with_time = events, clock, with_time
        self.segments: list[_Segment] = []
        self.free: dict[tuple, list[tuple[int, int]]] = {}  # pool -> sorted (size, addr)
        self.blocks: dict[int, _Block] = {}
        self.next_address = 0x7F0000000000

    def _event(self, action: str, addr: int, size: int, frames: list | None) -> None:
        entry = {"action": action, "addr": addr, "size": size, "stream": STREAM}
        if self.with_time:
            self.clock[0] += 7
            entry["time_us"] = self.clock[0]
        if frames is not None:
            entry["frames"] = frames
        self.events.append(entry)

    def _unfree(self, block: _Block) -> None:
        free = self.free[block.seg.pool]
        del free[bisect.bisect_left(free, (block.size, block.addr))]

    def _refree(self, block: _Block) -> None:
        bisect.insort(self.free.setdefault(block.seg.pool, []), (block.size, block.addr))

    def alloc(self, size: int, frames: list, pool: tuple = (0, 0)) -> int:
        size = -(-size // 512) * 512
        free = self.free.setdefault(pool, [])
        i = bisect.bisect_left(free, (size, -1))
        if i < len(free):
            block = self.blocks[free.pop(i)[1]]
        else:
            seg_size = max(SEGMENT, -(-size // (2 * MiB)) * 2 * MiB)
            seg = _Segment(self.next_address, seg_size, pool)
            self.next_address += seg_size + 2 * MiB
            self.segments.append(seg)
            self._event("segment_alloc", seg.address, seg_size, frames)
            block = seg.head = self.blocks[seg.address] = _Block(seg.address, seg_size, seg)
        if block.size - size >= 512:  # split: the remainder stays free
            rest = _Block(block.addr + size, block.size - size, block.seg)
            rest.prev, rest.next = block, block.next
            if block.next:
                block.next.prev = rest
            block.next, block.size = rest, size
            self.blocks[rest.addr] = rest
            self._refree(rest)
        block.state = "active_allocated"
        self._event("alloc", block.addr, block.size, frames)
        return block.addr

    def free_block(self, addr: int, frames: list, complete: bool = True) -> None:
        block = self.blocks[addr]
        self._event("free_requested", addr, block.size, frames)
        if not complete:
            block.state = "active_pending_free"
            return
        self._event("free_completed", addr, block.size, frames)
        block.state = "inactive"
        nxt = block.next
        if nxt is not None and nxt.state == "inactive":  # coalesce with the next block
            self._unfree(nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next:
                nxt.next.prev = block
            del self.blocks[nxt.addr]
        prev = block.prev
        if prev is not None and prev.state == "inactive":  # and with the previous one
            self._unfree(prev)
            prev.size += block.size
            prev.next = block.next
            if block.next:
                block.next.prev = prev
            del self.blocks[block.addr]
            block = prev
        self._refree(block)

    def segments_dump(self, device: int = 0) -> list[dict[str, Any]]:
        out = []
        for seg in self.segments:
            blocks: list[dict[str, Any]] = []
            block = seg.head
            while block is not None:
                live = block.state != "inactive"
                blocks.append({"address": block.addr, "size": block.size,
                               "requested_size": block.size if live else 0,
                               "state": block.state, "frames": STACKS["act"] if live else []})
                block = block.next
            allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            active = allocated + sum(b["size"] for b in blocks
                                     if b["state"] == "active_pending_free")
            out.append({"device": device, "address": seg.address, "total_size": seg.size,
                        "allocated_size": allocated, "active_size": active,
                        "requested_size": allocated, "stream": STREAM, "segment_type": "large",
                        "segment_pool_id": seg.pool, "is_expandable": False, "frames": [],
                        "blocks": blocks})
        return out


def layer_stacks(layer: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Activation and temporary stacks of one layer: torch frames, the block's own lines
    (attention or MLP), the model's layer loop, the training step."""
    model = "/home/user/model.py"
    block = ("attention", model, 60 + 10 * (layer % 4)) if layer % 2 else ("mlp", model, 90)
    outer = [("_call_impl", f"{TORCH}/nn/modules/module.py", 1750),
             ("forward", model, 120 + layer), ("_call_impl", f"{TORCH}/nn/modules/module.py",
                                               1750), ("train_step", TRAIN, 41)]
    act = _frames(("linear", f"{TORCH}/nn/functional.py", 100),
                  ("forward", f"{TORCH}/nn/modules/linear.py", 125), *[block], *outer)
    tmp = _frames(("softmax", f"{TORCH}/nn/functional.py", 2137), *[block], *outer)
    return act, tmp


def training_snapshot(target_events: int = 20000, layers: int = 12, seed: int = 0, *,
                      leak: bool = True, with_time: bool = True, profiler_steps: bool = True,
                      seq_lengths: tuple[int, ...] = (100, 300, 700, 1500, 3000),
                      hidden: int = 1024, private_pool: bool = False,
                      pending_at_end: bool = False, hold_output: bool = False,
                      per_layer_stacks: bool = False) -> dict[str, Any]:
    """A CUDA-style snapshot of a training loop with about `target_events` trace entries.
    `per_layer_stacks` gives each layer's activations and temporaries their own call stacks
    (a deep module path per layer), as a real model's do, for the flame graph's sake."""
    rng = random.Random(seed)
    events: list[dict] = []
    clock = [1_760_000_000_000_000]
    alloc = SimulatedAllocator(events, clock, with_time)
    annotations: list[dict] = []
    for _ in range(layers):  # the parameters, held for the whole run
        alloc.alloc(hidden * hidden * 4, STACKS["param"])
    grads: list[int] = []
    state: list[int] = []
    output = None
    step = 0
    while len(events) < target_events:
        if profiler_steps and with_time:
            annotations.append({"name": f"ProfilerStep#{step}", "stage": "START", "device": 0,
                                "time_us": clock[0] + 1})
        seq = rng.choice(seq_lengths)
        acts = []
        for layer in range(layers):
            act_stack, tmp_stack = layer_stacks(layer) if per_layer_stacks else (
                STACKS["act"], STACKS["tmp"])
            acts.append(alloc.alloc(seq * hidden * 4, act_stack))
            tmp = alloc.alloc(seq * hidden * 8, tmp_stack)
            alloc.free_block(tmp, tmp_stack)
        if hold_output:  # `out = model(x)`: the previous out dies only when out is rebound
            previous, output = output, alloc.alloc(seq * hidden * 16, STACKS["output"])
            if previous is not None:
                alloc.free_block(previous, STACKS["output"])
        for layer in reversed(range(layers)):
            if not grads or len(grads) < layers:
                grads.append(alloc.alloc(hidden * hidden * 4, STACKS["grad"]))
            tmp = alloc.alloc(seq * hidden * 4, STACKS["grad"])
            alloc.free_block(acts[layer], STACKS["grad"])
            alloc.free_block(tmp, STACKS["grad"])
        if not state:
            state = [alloc.alloc(hidden * hidden * 4, STACKS["state"]) for _ in range(2 * layers)]
        for _ in range(layers // 4 or 1):
            tmp = alloc.alloc(hidden * hidden * 4, STACKS["opt_tmp"])
            alloc.free_block(tmp, STACKS["opt_tmp"])
        if leak:
            alloc.alloc(LEAK_BYTES, STACKS["leak"])  # e.g. losses.append(loss) without .item()
        if private_pool and step % 4 == 0:
            graph = alloc.alloc(2 * MiB, STACKS["act"], pool=(1, 7))
            alloc.free_block(graph, STACKS["act"])
        if profiler_steps and with_time:
            annotations.append({"name": f"ProfilerStep#{step}", "stage": "END", "device": 0,
                                "time_us": clock[0]})
        step += 1
    if pending_at_end:
        held = alloc.alloc(3 * MiB, STACKS["tmp"])
        alloc.free_block(held, STACKS["tmp"], complete=False)
    snapshot: dict[str, Any] = {"segments": alloc.segments_dump(), "device_traces": [events]}
    if with_time:
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                          "garbage_collection_threshold": 0.0,
                                          "expandable_segments": False}
        snapshot["external_annotations"] = annotations
    snapshot["_facts"] = {"steps": step, "leak_bytes_per_step": LEAK_BYTES if leak else 0,
                          "leak_site": "train.py:48 (train_step)"}
    return snapshot


def truncate(snapshot: dict[str, Any], keep: int) -> dict[str, Any]:
    """What a ring buffer of `keep` entries would have written: the newest events only."""
    out = dict(snapshot)
    out["device_traces"] = [trace[-keep:] for trace in snapshot["device_traces"]]
    out["allocator_settings"] = dict(snapshot.get("allocator_settings", {}),
                                     trace_alloc_overflowed=True, trace_alloc_max_entries=keep)
    return out


def as_torch_npu(snapshot: dict[str, Any], workspace: int = 0) -> dict[str, Any]:
    """torch_npu's shape: only segments and device_traces, no time_us; optionally a live
    workspace block written as head triples and an inactive-looking workspace segment."""
    traces = [[{k: v for k, v in e.items() if k != "time_us"} for e in t]
              for t in snapshot["device_traces"]]
    segments = [dict(s) for s in snapshot["segments"]]
    if workspace:
        addr = 0x7E0000000000
        head: list[dict[str, Any]] = [{"action": a, "addr": addr, "size": workspace, "stream": STREAM, "frames": []}
                for a in ("workspace_snapshot", "segment_alloc", "alloc")]
        traces[0] = head + traces[0]
        segments.append({"device": 0, "address": addr, "total_size": workspace,
                         "allocated_size": 0, "active_size": 0, "requested_size": 0,
                         "stream": STREAM, "segment_type": "large", "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": [],
                         "blocks": [{"address": addr, "size": workspace, "requested_size": 0,
                                     "state": "inactive", "frames": []}]})
    return {"segments": segments, "device_traces": traces}


def as_legacy_list(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Old CUDA: a bare list of segments whose blocks carry `history` instead of frames."""
    out = []
    for seg in snapshot["segments"]:
        blocks = [{"address": b["address"], "size": b["size"], "state": b["state"],
                   "history": [{"addr": b["address"], "real_size": b["requested_size"],
                                "frames": b["frames"]}] if b["state"] != "inactive" else []}
                  for b in seg["blocks"]]
        out.append({k: v for k, v in seg.items() if k not in ("blocks", "frames")}
                   | {"blocks": blocks})
    return out

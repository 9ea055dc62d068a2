"""Live memory aggregated by call stack, operator, thread or stream at any moment.

The view MemoryViz and MindStudio draw as a flame graph (icicle): each block allocated after
an event adds its bytes to every frame of its stack, outermost first, so the widest paths are
where the memory was made. Blocks are grouped by (stack, operator, thread or stream) first, so
the work is per distinct stack, not per block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npu_migrate.memory.context import DeviceContext
from npu_migrate.memory.sites import NO_STACK, format_stack

VIEWS = ("frame", "operator", "thread", "stream")
NO_OPERATOR = "<no operator recorded>"
MAX_DEPTH = 64  # frames per path (the outermost ones are kept)


@dataclass
class Node:
    """One frame (or operator, thread, stream) of the icicle and what lies under it."""

    name: str
    bytes: int = 0
    blocks: int = 0
    children: dict[str, Node] = field(default_factory=dict)

    def add(self, path: list[str], nbytes: int, blocks: int) -> None:
        node = self
        node.bytes += nbytes
        node.blocks += blocks
        for name in path:
            node = node.children.setdefault(name, Node(name))
            node.bytes += nbytes
            node.blocks += blocks

    def ranked(self) -> list[Node]:
        return sorted(self.children.values(), key=lambda n: (-n.bytes, n.name))

    def to_json(self, floor: int) -> dict[str, Any]:
        """Nested {name, bytes, blocks, children}; children under `floor` bytes are summed
        into one `(n smaller)` node so the document stays small."""
        kept = [c for c in self.ranked() if c.bytes >= floor]
        rest = [c for c in self.ranked() if c.bytes < floor]
        children = [c.to_json(floor) for c in kept]
        if rest:
            children.append({"name": f"({len(rest)} smaller)", "bytes": sum(c.bytes for c in rest),
                             "blocks": sum(c.blocks for c in rest), "children": []})
        return {"name": self.name, "bytes": self.bytes, "blocks": self.blocks,
                "children": children}

    def lines(self, floor: int, depth: int = 0) -> list[tuple[int, Node]]:
        """(depth, node) in depth-first order, largest first, nodes under `floor` left out."""
        out = [(depth, self)]
        for child in self.ranked():
            if child.bytes >= floor:
                out += child.lines(floor, depth + 1)
        return out

    def folded(self, prefix: str = "") -> list[str]:
        """Brendan Gregg's folded format (`a;b;c bytes`), what flamegraph.pl and speedscope
        read: one line per leaf path with the bytes held only there."""
        path = f"{prefix};{self.name}" if prefix else self.name
        below = sum(c.bytes for c in self.children.values())
        out = [f"{path} {self.bytes - below}"] if self.bytes > below else []
        for child in self.ranked():
            out += child.folded(path)
        return out


def block_column(ctx: DeviceContext, rows: np.ndarray, column: np.ndarray | None,
                 missing: int = -1) -> np.ndarray:
    """A trace column (operator, thread, process, allocation id) read at each block's alloc
    event; `missing` where the block was allocated before the window or the producer has none."""
    alloc = ctx.rep.blocks.alloc[rows]
    if column is None:
        return np.full(len(rows), missing, np.int64)
    return np.where(alloc >= 0, column[np.maximum(alloc, 0)], missing).astype(np.int64)


def frame_path(ctx: DeviceContext, stack: int) -> list[str]:
    """Frames of a stack, outermost first (the last MAX_DEPTH kept: the innermost matter)."""
    if stack < 0:
        return [NO_STACK]
    return format_stack(ctx.snapshot.stacks[stack], limit=1 << 16)[-MAX_DEPTH:]


def operator_label(ctx: DeviceContext, operator: int) -> str:
    return ctx.snapshot.operators[operator] if operator >= 0 else NO_OPERATOR


def group_label(ctx: DeviceContext, view: str, key: int, process: int = -1) -> str:
    if view == "thread":
        return (f"process {process} thread {key}" if process >= 0 else f"thread {key}") \
            if key >= 0 else "<no thread recorded>"
    return hex(key) if view == "stream" else operator_label(ctx, key)


def tree(ctx: DeviceContext, rows: np.ndarray, view: str = "frame") -> Node:
    """Bytes of `rows` as an icicle: by frame (the stack, outermost first); by operator (the
    operator, then the stack under it); by thread or stream (that, then the stack)."""
    if view not in VIEWS:
        raise ValueError(f"--by {view!r}: choose one of {', '.join(VIEWS)}")
    blocks = ctx.rep.blocks
    trace = ctx.rep.trace
    stacks = blocks.stack[rows].astype(np.int64)
    if view == "operator":
        group = block_column(ctx, rows, trace.operator)
    elif view == "thread":
        group = block_column(ctx, rows, trace.thread)
    elif view == "stream":
        group = blocks.stream[rows].astype(np.int64)
    else:
        group = np.zeros(len(rows), np.int64)
    process = block_column(ctx, rows, trace.process)
    root = Node("all")
    if not len(rows):
        return root
    keys = np.stack([stacks, group, process], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    nbytes = np.bincount(inverse, weights=blocks.counted[rows], minlength=len(unique))
    counts = np.bincount(inverse, minlength=len(unique))
    for (stack, key, proc), size, count in zip(unique.tolist(), nbytes.tolist(), counts.tolist()):
        head = [] if view == "frame" else [group_label(ctx, view, key, proc)]
        path = frame_path(ctx, stack)
        if view == "operator" and path == [f"operator {head[0]}"]:
            path = []  # msMemScope rows without a Python stack: the operator is the stack
        root.add(head + path, int(size), int(count))
    return root


def top_stacks(ctx: DeviceContext, rows: np.ndarray, limit: int = 20) -> list[dict[str, Any]]:
    """The allocation identities (stack + operator) holding the most of `rows`, largest
    first: their frames (outermost first), site, operator, bytes and block count."""
    blocks = ctx.rep.blocks
    if not len(rows):
        return []
    operator = block_column(ctx, rows, ctx.rep.trace.operator)
    keys = np.stack([blocks.stack[rows].astype(np.int64), operator], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    nbytes = np.bincount(inverse, weights=blocks.counted[rows], minlength=len(unique))
    counts = np.bincount(inverse, minlength=len(unique))
    out: list[dict[str, Any]] = []
    for (stack, op), size, count in zip(unique.tolist(), nbytes.tolist(), counts.tolist()):
        out.append({"frames": frame_path(ctx, stack), "site": ctx.sites.site(stack),
                    "operator": ctx.snapshot.operators[op] if op >= 0 else None,
                    "category": ctx.sites.category(stack), "bytes": int(size),
                    "blocks": int(count)})
    # ties by content, not by stack index (the loader numbers stacks in no fixed order)
    out.sort(key=lambda e: (-e["bytes"], e["frames"], e["operator"] or ""))
    return out[:limit]


def groups(ctx: DeviceContext, rows: np.ndarray, view: str) -> list[dict[str, Any]]:
    """[{key, bytes, blocks}] of `rows` by operator, thread or stream, largest first."""
    root = tree(ctx, rows, view)
    return [{"key": node.name, "bytes": node.bytes, "blocks": node.blocks}
            for node in root.ranked()]


def group_views(ctx: DeviceContext) -> list[str]:
    """The grouping views this device's data supports (threads only from msMemScope, streams
    when there is more than one, operators only where recorded)."""
    trace = ctx.rep.trace
    views = []
    if trace.operator is not None and (trace.operator >= 0).any():
        views.append("operator")
    if trace.thread is not None and (trace.thread >= 0).any():
        views.append("thread")
    if len(np.unique(ctx.rep.blocks.stream)) > 1:
        views.append("stream")
    return views

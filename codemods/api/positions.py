"""Line/column of chosen nodes without LibCST's PositionProvider.

PositionProvider (and ByteSpanPositionProvider, its byte-offset sibling) records a range for
every node, and resolving either through a MetadataWrapper adds a full traversal of the tree:
several times what we need (`python bench/positions_bench.py`). We only need where the few nodes a
rule touched start, so we run one code generation pass that counts characters and notes the
offset where each wanted node's syntactic span starts, then map offsets to lines with a bisect.

The pass uses the code generation state of LibCST's public ByteSpanPositionProvider
(`libcst.metadata.span_provider.SpanProvidingCodegenState`) with its per-node bookkeeping
replaced by a set lookup, and drives it the way LibCST's own position providers do
(`Module._codegen`). No private LibCST module is imported. Verified against PositionProvider in
tests/engine.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import libcst as cst
from libcst.metadata.span_provider import SpanProvidingCodegenState


class _OffsetState(SpanProvidingCodegenState):
    """Counts characters in `position`; notes the start offset of each wanted node."""

    def __init__(self, module: cst.Module, wanted: set[int] | None) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline, provider=None)  # type: ignore[arg-type]
        self.wanted = wanted
        self.found: dict[int, int] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.position += len(token)
        self.tokens.extend(self.indent_tokens)

    def add_token(self, value: str) -> None:
        self.position += len(value)
        self.tokens.append(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.position -= len(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        pass  # no per-node range: only syntactic starts are wanted

    def after_codegen(self, node: cst.CSTNode) -> None:
        pass

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Iterator[None]:
        key = id(node)
        if (self.wanted is None or key in self.wanted) and key not in self.found:
            self.found[key] = self.position
        yield


def node_positions(module: cst.Module, nodes: Iterable[cst.CSTNode] | None) -> dict[int, tuple[int, int]]:
    """Map id(node) -> (line, column), both 1-based, for `nodes` (None: every node that has a
    syntactic position, which the Module itself has not) of `module`."""
    wanted = None if nodes is None else {id(node) for node in nodes}
    state = _OffsetState(module, wanted)
    module._codegen(state)
    text = "".join(state.tokens)
    line_starts = [0]
    index = text.find("\n")
    while index != -1:
        line_starts.append(index + 1)
        index = text.find("\n", index + 1)
    result = {}
    for key, offset in state.found.items():
        line = bisect_right(line_starts, offset)
        result[key] = (line, offset - line_starts[line - 1] + 1)
    return result

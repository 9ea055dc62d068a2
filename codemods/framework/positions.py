"""Line/column of chosen nodes without LibCST's PositionProvider.

PositionProvider tracks every token of every node and costs about 2.5 parses per file. We only
need positions for the few nodes a rule touched, so we run one code generation pass that counts
characters and notes the offset where each wanted node's syntactic span starts, then map offsets
to lines with a bisect. Verified against PositionProvider in tests.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState  # private, but stable across libcst 1.x


class _OffsetState(CodegenState):
    __slots__ = ("offset", "wanted", "found")

    def __init__(self, wanted: set[int] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offset = 0
        self.wanted = wanted
        self.found: dict[int, int] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.offset += len(token)
        self.tokens.extend(self.indent_tokens)

    def add_token(self, value: str) -> None:
        self.offset += len(value)
        self.tokens.append(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Any = None,
                                  end_node: Any = None) -> Iterator[None]:
        key = id(node)
        if (self.wanted is None or key in self.wanted) and key not in self.found:
            self.found[key] = self.offset
        yield


def node_positions(module: cst.Module, nodes: Iterable[cst.CSTNode] | None) -> dict[int, tuple[int, int]]:
    """Map id(node) -> (line, column), both 1-based, for `nodes` (None: every node) of `module`."""
    wanted = None if nodes is None else {id(node) for node in nodes}
    state = _OffsetState(wanted, default_indent=module.default_indent,
                         default_newline=module.default_newline)
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

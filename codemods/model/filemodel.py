"""The per-file model: one Python file as every analysis and rule of a run sees it.

The engine builds it once per file from the decoded text and its `ast` tree (ten times cheaper
than LibCST; LibCST parses only the pieces a rule rewrites). Everything derived from the whole
file is computed on first use and kept for the file's lifetime, whichever rule asks first:

- `facts`: import aliases, module-level constants, where the imports are (`FileFacts`);
- `parents` / `of_type`: one walk of the tree, shared (a node's parent, the nodes of a type);
- `derived(analysis, *args)`: the result of an analysis of `codemods.analyses`, memoized by the
  function and its arguments, so two rules reading the same analysis cost one computation.

An analysis is a function (or a class) taking the model first (`ConstantFlow(model, table)`); its
other arguments are told apart by identity (tables are per-process singletons).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from codemods.model.astnodes import child_nodes
from codemods.model.facts import FileFacts

T = TypeVar("T")


class FileModel:
    """A Python file: its path, text and `ast` tree, and what is derived from them, once."""

    def __init__(self, path: str, source: str, tree: ast.Module,
                 options: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self.options: Mapping[str, Any] = options or {}  # the run's rule options (project facts among them)
        self._facts: FileFacts | None = None
        self._derived: dict[tuple[Any, ...], Any] = {}
        self._parents: dict[int, ast.AST] | None = None
        self._by_type: dict[type[ast.AST], list[ast.AST]] | None = None
        self._order: list[ast.AST] = []

    @classmethod
    def empty(cls, path: str, source: str, options: Mapping[str, Any] | None = None) -> FileModel:
        """The model of a file that is not Python (a launch script, a config): no tree, no facts."""
        return cls(path, source, ast.Module(body=[], type_ignores=[]), options)

    @property
    def facts(self) -> FileFacts:
        if self._facts is None:
            self._facts = FileFacts.from_tree(self.tree)
        return self._facts

    def derived(self, analysis: Callable[..., T], *args: Any) -> T:
        """`analysis(self, *args)`, computed once per file. Arguments are told apart by identity
        (a table is one object per process); each is kept with the result, so its id stays its own."""
        key = (analysis, *map(id, args))
        if key not in self._derived:
            self._derived[key] = (args, analysis(self, *args))
        found: T = self._derived[key][1]
        return found

    def release(self) -> None:
        """Drop what was derived (an analysis may keep the model it was made from): the file is done."""
        self._derived.clear()
        self._parents = None
        self._by_type = None
        self._order = []

    @property
    def parents(self) -> dict[int, ast.AST]:
        """id(node) -> its parent, for every node of the tree but the module."""
        if self._parents is None:
            self._walk()
        assert self._parents is not None
        return self._parents

    def of_type(self, *kinds: type[ast.AST]) -> list[ast.AST]:
        """Every node of the given types, in `ast.walk`'s order (breadth first), so an analysis
        moved from its own walk to this one sees the nodes in the order it did."""
        if self._by_type is None:
            self._walk()
        assert self._by_type is not None
        if len(kinds) == 1:
            return self._by_type.get(kinds[0], [])
        return [node for node in self._in_order() if isinstance(node, kinds)]

    def _walk(self) -> None:
        parents: dict[int, ast.AST] = {}
        by_type: dict[type[ast.AST], list[ast.AST]] = {}
        order: list[ast.AST] = [self.tree]
        for node in order:  # grows while it is read: a breadth-first walk, as ast.walk
            by_type.setdefault(type(node), []).append(node)
            for child in child_nodes(node):
                parents[id(child)] = node
                order.append(child)
        self._parents, self._by_type, self._order = parents, by_type, order

    def _in_order(self) -> list[ast.AST]:
        if self._by_type is None:
            self._walk()
        return self._order

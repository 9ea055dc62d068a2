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

from codemods.model.astnodes import blank_spans, comment_spans, literal_spans, walked_fields
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
        self._position: dict[int, int] | None = None  # id(node) -> its place in `_order`, when asked

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
        self._position = None

    def code_lines(self, lines: list[str]) -> list[str]:
        """`lines` (the file's) with every comment and the inside of every long plain string literal
        blanked: what a rule that acts on code alone needs to see (`Rule.prefilter_in_code`).
        Comments, docstrings and help texts are where most words of CUDA in a library are;
        f-strings hold code and are kept."""
        literals, long = literal_spans(self.of_type(ast.Constant), self.of_type(ast.JoinedStr), lines)
        spans = long + comment_spans(lines, literals)
        return blank_spans(lines, spans) if spans else lines

    @property
    def parents(self) -> dict[int, ast.AST]:
        """id(node) -> its parent, for every node of the tree but the module."""
        if self._parents is None:
            self._walk()
        assert self._parents is not None
        return self._parents

    def of_type(self, *kinds: type[ast.AST]) -> list[ast.AST]:
        """Every node of the given types, in `ast.walk`'s order (breadth first), so an analysis
        moved from its own walk to this one sees the nodes in the order it did. One type is its
        exact class; several match subclasses too, as `isinstance` does. The walk leaves out the
        context and operator singletons (`ast.Load()`, `ast.Add()`)."""
        if self._by_type is None:
            self._walk()
        assert self._by_type is not None
        if len(kinds) == 1:
            return self._by_type.get(kinds[0], [])
        lists = [nodes for kind, nodes in self._by_type.items() if issubclass(kind, kinds)]
        if len(lists) < 2:
            return list(lists[0]) if lists else []
        if self._position is None:
            self._position = {id(node): index for index, node in enumerate(self._order)}
        position = self._position
        return sorted((node for nodes in lists for node in nodes), key=lambda node: position[id(node)])

    def _walk(self) -> None:
        parents: dict[int, ast.AST] = {}
        by_type: dict[type[ast.AST], list[ast.AST]] = {}
        order: list[ast.AST] = [self.tree]
        for node in order:  # grows while it is read: a breadth-first walk, as ast.walk
            kind = type(node)
            same = by_type.get(kind)
            if same is None:
                same = by_type[kind] = []
            same.append(node)
            for name in walked_fields(kind):
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.AST):
                            parents[id(item)] = node
                            order.append(item)
                elif isinstance(value, ast.AST):
                    parents[id(value)] = node
                    order.append(value)
        self._parents, self._by_type, self._order = parents, by_type, order

"""The one-pass dispatch: `RuleRunner` runs every selected rule over one parsed piece in a single
LibCST traversal, drops suppressed changes, and places what the rules recorded at file positions.
`compile_prefilter` joins the selected rules' prefilters."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from types import MethodType
from typing import Any, cast

import libcst as cst

from codemods.api.positions import node_positions
from codemods.api.rule import Recorded, Rule, TreeScratch
from codemods.model.cstnodes import child_fields
from npu_migrate.core.diagnostics import Diagnostic, Edit

_IMPORTS = (cst.Import, cst.ImportFrom)

# Nodes whose subtree holds only whitespace, comments, operators and brackets: two thirds of a
# tree's nodes. A runner none of whose rules handles one of these kinds never enters them.
_TRIVIA_FAMILIES = (cst.BaseParenthesizableWhitespace, cst.BaseBinaryOp, cst.BaseBooleanOp,
                    cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp)
_TRIVIA_NAMED = (cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment, cst.Comma, cst.Dot,
                 cst.Colon, cst.Semicolon, cst.AssignEqual, cst.ImportStar, cst.LeftParen,
                 cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
                 cst.RightCurlyBrace)
# Leaves whose only children are trivia (their parentheses): entered only when a rule handles them.
_LEAVES = (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)


def _trivia() -> frozenset[type[cst.CSTNode]]:
    kinds: set[type[cst.CSTNode]] = set(_TRIVIA_NAMED)
    for name in dir(cst):
        kind = getattr(cst, name)
        if isinstance(kind, type) and issubclass(kind, _TRIVIA_FAMILIES) and kind not in _TRIVIA_FAMILIES:
            kinds.add(kind)
    return frozenset(kinds)


_TRIVIA = _trivia()


def _as_report(make: Callable[[int, int], Any], path: str, rule: Rule) -> Callable[[int, int], Any]:
    """A recorded edit of a report-only rule, turned into a diagnostic at the same place."""
    from codemods.api.targets import report_instead

    def made(line: int, col: int) -> Any:
        item = make(line, col)
        return report_instead(item, path, rule) if isinstance(item, Edit) else item
    return made


class RuleCrash(Exception):
    """A rule raised: the engine fails that one file and names the rule."""

    def __init__(self, code: str, error: Exception) -> None:
        super().__init__(f"rule {code} crashed: {type(error).__name__}: {error}")
        self.code = code


class _Replace(cst.CSTTransformer):
    """Rebuilds one node with some of its direct children replaced (by id of the old child),
    through the node's own `_visit_and_replace_children`: LibCST's rules for removed and
    flattened children and for emptied statement lines apply as in its own traversal."""

    def __init__(self, replaced: dict[int, Any]) -> None:
        super().__init__()
        self.replaced = replaced

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.replaced.get(id(original_node), original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None


_RESULTS = (cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel)


_HOOKS: dict[type[Rule], tuple[str, ...]] = {}


def _hooks(rule: type[Rule]) -> tuple[str, ...]:
    """The rule's `visit_Node` and `leave_Node` methods, by name."""
    hooks = _HOOKS.get(rule)
    if hooks is None:
        hooks = _HOOKS[rule] = tuple(attr for attr in dir(rule)
                                     if attr.startswith(("visit_", "leave_")) and "_" not in attr[6:])
    return hooks


def handled_nodes(rules: Iterable[type[Rule]], target: str) -> set[str]:
    """The LibCST node types (`If`, `Call`) that some of `rules` visits or leaves under `target`."""
    return {attr[6:] for rule in rules for attr in _hooks(rule) if attr[6:] not in rule.idle_hooks(target)}


class RuleRunner(cst.CSTTransformer):
    """Runs many rules in one traversal: dispatches each node to every rule that handles its type.

    The traversal is LibCST's transformer protocol (`on_visit`, then the children, then
    `on_leave(original, updated)`), but a node is rebuilt only where a child of it changed: an
    unchanged subtree reaches `leave_` methods as `updated_node is original_node`, and an
    unchanged piece needs no code generation. LibCST's own traversal rebuilds every node.

    A rule's change to a node on a line carrying `# npu-migrate: ignore[CODE]` is dropped, with
    the edits it recorded, so suppression works for fixes as well as for diagnostics.
    """

    def __init__(self, rules: Iterable[Rule]) -> None:
        super().__init__()
        self.rules = list(rules)
        deps: set[Any] = set()
        self._visit: dict[str, list[MethodType]] = {}  # bound methods of the rules
        self._leave: dict[str, list[tuple[Rule, Callable[..., Any]]]] = {}
        for rule in self.rules:
            rule.runner = self
            deps.update(rule.METADATA_DEPENDENCIES)
            idle = type(rule).idle_hooks(rule.target)
            for attr in _hooks(type(rule)):
                if attr[6:] in idle:
                    continue
                if attr.startswith("visit_"):
                    self._visit.setdefault(attr[6:], []).append(getattr(rule, attr))
                else:
                    self._leave.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))
        self.METADATA_DEPENDENCIES = tuple(deps)  # type: ignore[misc]
        handled = self._visit.keys() | self._leave.keys()
        trivia_handled = any(kind.__name__ in handled for kind in _TRIVIA)
        self._skipped = frozenset() if trivia_handled else _TRIVIA | {
            kind for kind in _LEAVES if kind.__name__ not in handled}
        self._context = self.rules[0].context if self.rules else None
        self._accepted: list[tuple[cst.CSTNode, Callable[[int, int], Any]]] = []
        self._all_positions: dict[int, tuple[int, int]] | None = None

    def release(self) -> None:
        """Forget the rules (their bound methods refer back to them): the file is done."""
        self.rules = []
        self._visit, self._leave = {}, {}
        self._context = None
        self._accepted = []
        self._all_positions = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind in _IMPORTS:
            self._context.in_import += 1  # type: ignore[union-attr]
        methods = self._visit.get(kind.__name__)
        if not methods:
            return True
        context = self._context
        assert context is not None
        context._pending = []
        for method in methods:
            rule = cast(Rule, method.__self__)
            # a report-only rule may plan its rewrite on the way down (NPU171 asks for
            # `import torch_npu` there): nothing of a rewrite it will not make may stay
            kept = (set(context.imports), set(context.definitions)) if rule.report_only else None
            try:
                method(node)
            except Exception as exc:
                raise RuleCrash(rule.code, exc) from exc
            if kept is not None:
                context.imports, context.definitions = kept
        # keep what visit_ methods report (on_leave collects only what leave_ methods say)
        self._accepted.extend(context._pending)
        context._pending = []
        return True

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        kind = type(original_node)
        if kind in _IMPORTS:
            self._context.in_import -= 1  # type: ignore[union-attr]
        handlers = self._leave.get(kind.__name__)
        if not handlers:
            return updated_node
        context = self._context
        assert context is not None
        for rule, method in handlers:
            context._pending = []
            imports = (set(context.imports), set(context.definitions)) if rule.report_only else None
            try:
                result = method(original_node, updated_node)
            except Exception as exc:
                raise RuleCrash(rule.code, exc) from exc
            pending = context._pending
            context._pending = []
            if imports is not None and result is not updated_node:
                context.imports, context.definitions = imports  # report-only: nothing of the rewrite stays
                result = updated_node
                pending = [(node, _as_report(make, context.path, rule)) for node, make in pending]
            if result is not updated_node and self.suppressed(rule.code, original_node):
                continue  # drop the change and what the rule said about it
            self._accepted.extend(pending)
            if result is not updated_node:
                updated_node = result
                if not isinstance(result, type(original_node)):
                    break  # removed or replaced by another kind of node: other rules cannot apply
        return updated_node

    # rules are dispatched per node type only (see __init__): skip LibCST's per-attribute
    # `visit_<Node>_<attr>` lookups, two getattr calls for every child of every node
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def _walk(self, node: cst.CSTNode) -> Any:
        self.on_visit(node)
        replaced: dict[int, Any] | None = None
        skipped = self._skipped
        for name in child_fields(type(node)):
            value = getattr(node, name)
            children = (value,) if isinstance(value, cst.CSTNode) else value if isinstance(value, (tuple, list)) else ()
            for child in children:
                if type(child) in skipped:
                    continue
                new = self._walk(child)
                if new is not child:
                    replaced = replaced or {}
                    replaced[id(child)] = new
        updated = node if replaced is None else node._visit_and_replace_children(_Replace(replaced))
        result = self.on_leave(node, updated)
        if not isinstance(result, _RESULTS):  # what LibCST's traversal says of such a result
            raise cst.CSTValidationError("Expected a node of type CSTNode or a RemovalSentinel, "
                                         f"but got a return value of {type(result).__name__}")
        return result

    def _transform(self, module: cst.Module) -> cst.Module:
        result = self._walk(module)
        if isinstance(result, cst.RemovalSentinel):  # as `Module.visit` answers it
            return module.with_changes(body=(), header=(), footer=())
        return cast(cst.Module, result)

    def revise_recorded(self, revise: Callable[[cst.CSTNode, Recorded], Recorded | None]) -> None:
        revised = ((node, revise(node, recorded)) for node, recorded in self._accepted)
        self._accepted = [(node, recorded) for node, recorded in revised if recorded is not None]

    def suppressed(self, code: str, node: cst.CSTNode) -> bool:
        context = self._context
        assert context is not None and context.suppressions is not None
        if not context.suppressions:
            return False
        if self._all_positions is None:  # files with suppressions are rare: map every node once
            assert context.module is not None
            self._all_positions = node_positions(context.module, None)
        position = self._all_positions.get(id(node))
        if position is None:  # the Module itself has no syntactic position: nothing to suppress
            return False
        line = position[0] + context.line_offset
        return context.suppressions.suppresses(code, line)

    def run(self, module: cst.Module, line_offset: int,
            col_shift: Sequence[int] = ()) -> tuple[cst.Module, list[Edit | Diagnostic]]:
        """Transform one parsed chunk. Returns the new chunk and what the rules recorded, placed
        in the file: `line_offset` lines down, and `col_shift[i]` columns right on chunk line i+1
        (the indentation the engine removed to parse a nested block on its own)."""
        context = self._context
        assert context is not None
        context.module = module
        context.line_offset = line_offset
        self._accepted = []
        self._all_positions = None
        for rule in self.rules:
            rule.runner = self  # a file's rules may serve several runners (one per rule subset)
            rule.tree = TreeScratch()  # a fresh scratch per tree: its lifetime is this traversal
        try:
            if self.METADATA_DEPENDENCIES:
                with self.resolve(cst.MetadataWrapper(module, unsafe_skip_copy=True)):
                    new_module = self._transform(module)
            else:
                new_module = self._transform(module)
        finally:
            for rule in self.rules:
                rule.tree = TreeScratch()  # drop this tree's nodes with the tree
        items: list[Edit | Diagnostic] = []
        if self._accepted:
            where = node_positions(module, [node for node, _ in self._accepted])
            for node, make in self._accepted:
                line, col = where[id(node)]
                shift = col_shift[line - 1] if line - 1 < len(col_shift) else 0
                items.append(make(line + line_offset, col + shift))
        return new_module, items


def compile_prefilter(rules: Iterable[type[Rule]]) -> re.Pattern[str] | None:
    """One regex for the selected rules; None means some rule wants every file."""
    patterns = []
    for rule in rules:
        if not rule.prefilter:
            return None
        patterns.append(f"(?:{rule.prefilter})")
    return re.compile("|".join(patterns)) if patterns else re.compile(r"(?!)")

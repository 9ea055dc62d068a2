"""The rule API: one small LibCST transformer per concern, run together in one traversal.

A rule subclasses `Rule`, sets its code, name, summary, fix safety and a cheap `prefilter`
regex, and defines LibCST `visit_<Node>` / `leave_<Node>` methods as a `CSTTransformer`
would. Rules never do I/O: they see a tree and a `RuleContext` and return a tree; edits and
diagnostics are recorded with `self.fixed(...)` and `self.report(...)`.

Rule state has two lifetimes, both controlled by the engine. A rule instance lives for one
file (the engine makes new instances for every file), so plain attributes and `self.file` are
per-file. State about nodes belongs in `self.tree`, a `TreeScratch` the runner creates before
it visits a tree and drops after: the engine parses a file statement by statement, and a node
remembered past its tree (by `id()`, say) could match an unrelated node of a later tree that
reuses its address. The scratch is keyed by the nodes themselves (LibCST nodes compare by
identity), so a key can neither outlive its tree nor be mistaken for another node.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MethodType
from typing import Any, ClassVar, cast

import libcst as cst

from codemods.framework.facts import FileFacts
from codemods.framework.positions import node_positions
from codemods.framework.suppression import Suppressions
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity
from npu_migrate.core.discovery import CUDA_SUFFIXES, JSON_SUFFIXES, MANIFEST_SUFFIXES, SHELL_SUFFIXES

# The languages a rule may have besides "python", and the files each one handles: rules in them
# see a file's text, not a tree. Python is everything else.
# ("json": the DeepSpeed configuration files discovery chose, NPU540; "manifest": the pip
# requirements and conda environment files it chose by name, NPU315)
TEXT_LANGUAGES = {"shell": SHELL_SUFFIXES, "cuda": CUDA_SUFFIXES, "json": JSON_SUFFIXES,
                  "manifest": MANIFEST_SUFFIXES}


class Fix(str, enum.Enum):
    """Fix safety, as ruff has it: safe fixes keep meaning; unsafe ones may not (opt-in)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    NONE = "none"  # diagnostic only


@dataclass
class RuleContext:
    """What a rule may know about the file it is looking at. Shared by all rules of a run."""

    path: str
    source: str
    facts: FileFacts
    options: Mapping[str, Any] = field(default_factory=dict)
    suppressions: Suppressions = field(default_factory=Suppressions)
    edits: list[Edit] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # imports the rewritten code needs; the engine adds the missing ones after the pass
    imports: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    # module-level statements the rewrite needs after the imports (portable's DEVICE)
    definitions: set[str] = field(default_factory=set)
    # set by the runner for the chunk being processed (line offset of the chunk in the file)
    line_offset: int = 0
    in_import: int = 0  # > 0 while the traversal is inside an import statement (kept by the runner)
    module: cst.Module | None = None
    _pending: list[tuple[cst.CSTNode, Callable[[int, int], Any]]] = field(default_factory=list)

    def resolve(self, node: cst.CSTNode) -> str | None:
        """Qualified name of a Name/Attribute chain, aliases resolved (`th.cuda` -> `torch.cuda`)."""
        parts = dotted_parts(node)
        return self.facts.qualify(parts) if parts else None

    def require_import(self, module: str, name: str | None = None, asname: str | None = None) -> None:
        """Ask the engine for `import module` or `from module import name [as asname]`."""
        self.imports.add((module, name, asname))


def dotted_parts(node: cst.CSTNode) -> list[str] | None:
    """`a.b.c` -> ['a', 'b', 'c']; None when the chain has anything but names."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    parts.reverse()
    return parts


def dotted_name(node: cst.CSTNode | None) -> str | None:
    """`a.b.c` -> "a.b.c" (module names in imports, attribute chains); None otherwise."""
    parts = dotted_parts(node) if node is not None else None
    return ".".join(parts) if parts else None


def dotted_expr(dotted: str) -> cst.BaseExpression:
    """'torch.npu.synchronize' -> the Attribute chain expression."""
    head, *rest = dotted.split(".")
    expr: cst.BaseExpression = cst.Name(head)
    for part in rest:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


class TreeScratch(dict[str, Any]):
    """A rule's state about the nodes of the tree being visited (see the module docstring).
    `nodes(name)` is a named set of nodes, `table(name)` a named node -> value mapping."""

    def nodes(self, name: str) -> set[cst.CSTNode]:
        found: set[cst.CSTNode] = self.setdefault(name, set())
        return found

    def table(self, name: str) -> dict[cst.CSTNode, Any]:
        found: dict[cst.CSTNode, Any] = self.setdefault(name, {})
        return found


class Rule:
    """Base of every codemod. Subclasses set the class attributes and define visit/leave methods."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    fix: ClassVar[Fix] = Fix.SAFE
    default: ClassVar[bool] = True  # in the default set; opt-in rules (insertions) say False
    severity: ClassVar[Severity] = Severity.INFO  # severity of self.report() without an override
    prefilter: ClassVar[str] = ""  # regex on the raw text; a file (chunk) is parsed only if some rule's matches
    needs_torch_npu: ClassVar[bool] = False  # its edits make the file depend on `import torch_npu`
    # True for rules that must see whole top-level statements (a loop and the function around
    # it); others may be handed one statement of a function or class body, dedented
    whole_statements: ClassVar[bool] = False
    # "python" rules are LibCST transformers; rules in one of TEXT_LANGUAGES ("shell", "cuda")
    # implement `rewrite_text` over the file's text (and record edits with `fixed_at`/`report_at`).
    language: ClassVar[str] = "python"
    # the targets it writes code for (codemods/framework/targets.py): under another target the
    # engine runs it report-only; a portable rule names the npu rules it stands in for
    supported_targets: ClassVar[frozenset[str]] = frozenset({"npu"})
    replaces: ClassVar[tuple[str, ...]] = ()
    # why its CUDA code may stay as it is under `portable` (harmless elsewhere, or nothing
    # device-generic exists): its would-be npu rewrites are then info lines saying so
    portable_keeps: ClassVar[str | None] = None
    METADATA_DEPENDENCIES: ClassVar[tuple[Any, ...]] = ()

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.runner: RuleRunner | None = None
        self.file: dict[str, Any] = {}  # per-file state (a rule instance serves one file)
        # per-tree state; only valid during a traversal (the runner sets and drops it)
        self.tree: TreeScratch = TreeScratch()
        self.report_only = False  # set by the engine: its rewrites are dropped and reported

    @property
    def target(self) -> str:
        return self.context.options.get("target") or "npu"

    @classmethod
    def project_prefilter(cls, options: Mapping[str, Any]) -> str | None:
        """A regex for more text the rule acts on, built from the run's rule options: for a rule
        whose targets are names a project defines (the modules of its CUDA extensions, NPU311),
        which no fixed `prefilter` can spell. None (most rules): `prefilter` alone."""
        return None

    # -- helpers for rule authors ------------------------------------------------------------
    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = None) -> Any:
        assert self.runner is not None
        return self.runner.get_metadata(key, node, default)

    def fixed(self, node: cst.CSTNode, message: str) -> None:
        """Record that this rule rewrote `node` (an original node), with an explanation."""
        code = self.code
        self.context._pending.append((node, lambda line, col: Edit(code, message, line, col)))

    def report(self, node: cst.CSTNode, message: str, severity: Severity | None = None,
               code: str | None = None) -> None:
        """Record a diagnostic at `node` (an original node)."""
        sev = severity or self.severity
        code = code or self.code
        path = self.context.path
        self.context._pending.append(
            (node, lambda line, col: Diagnostic(code, message, path, line, col, sev)))

    def resolve(self, node: cst.CSTNode) -> str | None:
        return self.context.resolve(node)

    def fixed_at(self, line: int, col: int, message: str) -> None:
        """For text (shell) rules: record an edit at a known position of the original text."""
        self.context.edits.append(Edit(self.code, message, line, col))

    def report_at(self, line: int, col: int, message: str, severity: Severity | None = None,
                  code: str | None = None) -> None:
        self.context.diagnostics.append(Diagnostic(code or self.code, message, self.context.path,
                                                   line, col, severity or self.severity))

    def rewrite_text(self, text: str) -> str:
        """Shell rules override this; Python rules use visit/leave methods instead."""
        return text

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"code": cls.code, "name": cls.name, "summary": cls.summary, "fix": cls.fix.value,
                "default": cls.default}


_IMPORTS = (cst.Import, cst.ImportFrom)


def _as_report(make: Callable[[int, int], Any], path: str, rule: Rule) -> Callable[[int, int], Any]:
    """A recorded edit of a report-only rule, turned into a diagnostic at the same place."""
    from codemods.framework.targets import report_instead

    def made(line: int, col: int) -> Any:
        item = make(line, col)
        return report_instead(item, path, rule) if isinstance(item, Edit) else item
    return made


class RuleCrash(Exception):
    """A rule raised: the engine fails that one file and names the rule."""

    def __init__(self, code: str, error: Exception) -> None:
        super().__init__(f"rule {code} crashed: {type(error).__name__}: {error}")
        self.code = code


class RuleRunner(cst.CSTTransformer):
    """Runs many rules in one traversal: dispatches each node to every rule that handles its type.

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
            for attr in dir(type(rule)):
                if attr.startswith("visit_") and "_" not in attr[6:]:
                    self._visit.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_") and "_" not in attr[6:]:
                    self._leave.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))
        self.METADATA_DEPENDENCIES = tuple(deps)  # type: ignore[misc]
        self._context = self.rules[0].context if self.rules else None
        self._accepted: list[tuple[cst.CSTNode, Callable[[int, int], Any]]] = []
        self._all_positions: dict[int, tuple[int, int]] | None = None

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
            if result is not updated_node and self._suppressed(rule.code, original_node):
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

    def _suppressed(self, code: str, node: cst.CSTNode) -> bool:
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
                new_module = cst.MetadataWrapper(module, unsafe_skip_copy=True).visit(self)
            else:
                new_module = module.visit(self)
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

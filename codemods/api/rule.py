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
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import libcst as cst

from codemods.api.facts import ProjectFact
from codemods.api.suppression import Suppressions
from codemods.model.cstnodes import dotted_parts, imported_chain
from codemods.model.facts import FileFacts
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity
from npu_migrate.core.discovery import (
    CONFIG_SUFFIXES,
    CUDA_SUFFIXES,
    JSON_SUFFIXES,
    MANIFEST_SUFFIXES,
    SHELL_SUFFIXES,
)

# The languages a rule may have besides "python", and the files each one handles: rules in them
# see a file's text, not a tree. Python is everything else.
# ("json": the DeepSpeed configuration files discovery chose, NPU540; "manifest": the pip
# requirements and conda environment files it chose by name, NPU315; "config": the other YAML
# files, NPU541). A file takes the first language that claims it.
TEXT_LANGUAGES = {"shell": SHELL_SUFFIXES, "cuda": CUDA_SUFFIXES, "json": JSON_SUFFIXES,
                  "manifest": MANIFEST_SUFFIXES, "config": CONFIG_SUFFIXES}


class Fix(str, enum.Enum):
    """Fix safety, as ruff has it: safe fixes keep meaning; unsafe ones may not (opt-in)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    NONE = "none"  # diagnostic only


@dataclass
class RuleContext:
    """What a rule may know about the file it is looking at. Shared by all rules of a file.

    `model` is the per-file model (`codemods.model.filemodel`): the text, the `ast` tree, the
    facts and every analysis derived from them, computed once whichever rule asks first."""

    model: FileModel
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
    # lines of the piece being processed (1-based, in the piece) that a rule removed whole, so that
    # the engine can give the other lines of a nested piece their indentation back (NPU161)
    removed_lines: set[int] = field(default_factory=set)
    module: cst.Module | None = None
    _pending: list[tuple[cst.CSTNode, Callable[[int, int], Any]]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.model.path

    @property
    def source(self) -> str:
        """The whole decoded text of the file."""
        return self.model.source

    @property
    def facts(self) -> FileFacts:
        return self.model.facts

    @property
    def options(self) -> Mapping[str, Any]:
        """The run's rule options: settings meant for rules, and the project facts they declared."""
        return self.model.options

    def resolve(self, node: cst.CSTNode) -> str | None:
        """Qualified name of a Name/Attribute chain, aliases resolved (`th.cuda` -> `torch.cuda`),
        also on a module the builtin `__import__` returns (`__import__("torch").cuda`, a name
        the file does not bind otherwise)."""
        parts = dotted_parts(node)
        if parts:
            return self.facts.qualify(parts)
        imported = imported_chain(node)
        return ".".join(imported) if imported else None

    def require_import(self, module: str, name: str | None = None, asname: str | None = None) -> None:
        """Ask the engine for `import module` or `from module import name [as asname]`."""
        self.imports.add((module, name, asname))


# what a rule recorded about a node, made into an Edit or a Diagnostic once its position is known
Recorded = Callable[[int, int], Any]


class Traversal(Protocol):
    """What a rule may ask of the traversal that runs it (`codemods.api.runner.RuleRunner`)."""

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = None) -> Any:
        """The LibCST metadata the rule declared in `METADATA_DEPENDENCIES`."""

    def suppressed(self, code: str, node: cst.CSTNode) -> bool:
        """Whether `node` sits on a line that suppresses `code`."""

    def revise_recorded(self, revise: Callable[[cst.CSTNode, Recorded], Recorded | None]) -> None:
        """Let a rule that undoes a piece of the rewrite revise what the rules recorded so far in
        this piece: `revise(node, recorded)` returns what stays (None drops it)."""


class TreeScratch(dict[str, Any]):
    """A rule's state about the nodes of the tree being visited (see the module docstring).
    `nodes(name)` is a named set of nodes, `table(name)` a named node -> value mapping."""

    def nodes(self, name: str) -> set[cst.CSTNode]:
        found: set[cst.CSTNode] = self.setdefault(name, set())
        return found

    def table(self, name: str) -> dict[cst.CSTNode, Any]:
        found: dict[cst.CSTNode, Any] = self.setdefault(name, {})
        return found


# lines a rule may act on in one file (`Rule.target_lines`): (first, last), 1-based, inclusive
LineSpan = tuple[int, int]


class LineSpans:
    """A rule's target lines in one file, merged and sorted: asked whether a piece meets them."""

    def __init__(self, spans: Iterable[LineSpan]) -> None:
        merged: list[list[int]] = []
        for first, last in sorted(spans):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        self.firsts = [first for first, _ in merged]
        self.lasts = [last for _, last in merged]

    def __bool__(self) -> bool:
        return bool(self.firsts)

    def meets(self, start: int, end: int) -> bool:
        """Whether lines [start, end) hold a line of a span (the spans are disjoint and sorted,
        so the last one starting before `end` reaches furthest among those)."""
        i = bisect_right(self.firsts, end - 1) - 1
        return i >= 0 and self.lasts[i] >= start


class Rule:
    """Base of every codemod. Subclasses set the class attributes and define visit/leave methods."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    fix: ClassVar[Fix] = Fix.SAFE
    default: ClassVar[bool] = True  # in the default set; opt-in rules (insertions) say False
    # families a selector may name besides the code and the name (`--enable tune`)
    families: ClassVar[tuple[str, ...]] = ()
    severity: ClassVar[Severity] = Severity.INFO  # severity of self.report() without an override
    prefilter: ClassVar[str] = ""  # regex on the raw text; a file (chunk) is parsed only if some rule's matches
    # whether the rule acts on code alone: then a match of its prefilter inside a long plain string
    # (a docstring, a help text) does not make the engine parse that statement for it
    prefilter_in_code: ClassVar[bool] = False
    needs_torch_npu: ClassVar[bool] = False  # its edits make the file depend on `import torch_npu`
    adds_torch_npu_import: ClassVar[bool] = False  # the rule that writes `import torch_npu` says True
    # True for rules that must see whole top-level statements (a loop and the function around
    # it); others may be handed one statement of a function or class body, dedented
    whole_statements: ClassVar[bool] = False
    # "python" rules are LibCST transformers; rules in one of TEXT_LANGUAGES ("shell", "cuda")
    # implement `rewrite_text` over the file's text (and record edits with `fixed_at`/`report_at`).
    language: ClassVar[str] = "python"
    # the targets it writes code for (codemods/api/targets.py): under another target the
    # engine runs it report-only; a portable rule names the npu rules it stands in for
    supported_targets: ClassVar[frozenset[str]] = frozenset({"npu"})
    replaces: ClassVar[tuple[str, ...]] = ()
    # why its CUDA code may stay as it is under `portable` (harmless elsewhere, or nothing
    # device-generic exists): its would-be npu rewrites are then info lines saying so
    portable_keeps: ClassVar[str | None] = None
    # what it needs to know about the other files of its package root (codemods/api/facts.py):
    # a run builds exactly the facts its selected rules declare, and each rule reads a fact's
    # index for its file in `self.context.options[fact.key]`
    project_facts: ClassVar[tuple[ProjectFact, ...]] = ()
    METADATA_DEPENDENCIES: ClassVar[tuple[Any, ...]] = ()

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.runner: Traversal | None = None
        self.file: dict[str, Any] = {}  # per-file state (a rule instance serves one file)
        # per-tree state; only valid during a traversal (the runner sets and drops it)
        self.tree: TreeScratch = TreeScratch()
        self.report_only = False  # set by the engine: its rewrites are dropped and reported

    @property
    def target(self) -> str:
        return self.context.options.get("target") or "npu"

    @classmethod
    def idle_hooks(cls, target: str) -> frozenset[str]:
        """The node types (`If`) whose `visit_`/`leave_` hooks do nothing under `target`: the
        runner does not call them, and the engine may then parse those statements' blocks one by
        one (a rule that visits `If` sees every `if` whole, with all its arms)."""
        return frozenset()

    @classmethod
    def project_prefilter(cls, options: Mapping[str, Any]) -> str | None:
        """A regex for more text the rule acts on, built from the run's rule options: for a rule
        whose targets are names a project defines (the modules of its CUDA extensions, NPU311),
        which no fixed `prefilter` can spell. None (most rules): `prefilter` alone."""
        return None

    def target_lines(self) -> Iterable[LineSpan] | None:
        """Where in this file the rule can act, worked out once per file on the `ast` model
        (`self.context.model`) before LibCST parses anything: (first, last) line pairs. The engine
        hands the rule only the pieces that meet one of them, and drops it for the file when there
        is none, so no piece is parsed for a rule that would say nothing there. None (the default):
        every piece its prefilter matches.

        A gate must only leave out what the rule could never act on: every node that one of its
        visit methods would rewrite, report or remember for a later node lies on the lines
        returned (aliases included: `from torch.cuda import amp as a` makes `a` a target)."""
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

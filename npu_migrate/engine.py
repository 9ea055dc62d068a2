"""The migration engine for one file: prefilter, parse once, run every selected rule in one
pass, add the imports the rewrite needs, re-parse, and hand back text, edits and diagnostics.

Only the parts of a file that can possibly need a rule are given to LibCST: the file is split
into chunks at its top-level statements (found with `ast`, ten times cheaper than LibCST) and a
chunk is parsed only when a selected rule's prefilter matches it. Each byte is parsed at most
once by LibCST; everything else passes through verbatim.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from npu_migrate.diagnostics import Diagnostic, Edit, Severity
from npu_migrate_codemods.base import Rule, RuleContext, RuleRunner, compile_prefilter
from npu_migrate_codemods.facts import FileFacts
from npu_migrate_codemods.imports import insert_imports, split_lines
from npu_migrate_codemods.suppression import Suppressions, skips_file

SHELL_SUFFIXES = (".sh", ".bash")


@dataclass
class FileOutcome:
    """What happened to one file. `new_text` is None when nothing changed."""

    path: str
    new_text: str | None = None
    edits: list[Edit] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    parsed: bool = False  # whether LibCST was needed at all

    @property
    def changed(self) -> bool:
        return self.new_text is not None

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)


class RuleSet:
    """The selected rules of a run, split by language, with their combined prefilters."""

    def __init__(self, rules: Sequence[type[Rule]], options: Mapping[str, Any] | None = None) -> None:
        self.rules = list(rules)
        self.options = dict(options or {})
        self.python = [r for r in self.rules if r.language == "python"]
        self.shell = [r for r in self.rules if r.language == "shell"]
        self.python_filter = compile_prefilter(self.python)
        self.shell_filter = compile_prefilter(self.shell)
        self._single = {r: (re.compile(r.prefilter) if r.prefilter else None) for r in self.rules}

    def codes(self) -> list[str]:
        return [r.code for r in self.rules]

    def matching(self, rules: Iterable[type[Rule]], text: str) -> list[type[Rule]]:
        found = []
        for rule in rules:
            pattern = self._single[rule]
            if pattern is None or pattern.search(text):
                found.append(rule)
        return found

    def wants(self, path: str) -> bool:
        return bool(self.shell) if path.endswith(SHELL_SUFFIXES) else bool(self.python)


def migrate_text(text: str, path: str, ruleset: RuleSet) -> FileOutcome:
    """Migrate one file's decoded text. Never raises: errors land in `error`, and the file
    is left as it was."""
    try:
        return _migrate(text, path, ruleset)
    except RecursionError:
        return FileOutcome(path, error=f"{path}:0:0: too deeply nested to migrate; file left untouched")
    except Exception as exc:  # a bug in a rule must cost one file, not the run
        return FileOutcome(path, error=f"{path}:0:0: internal error ({type(exc).__name__}: {exc}); "
                                       "file left untouched (please report this as a bug)")


def _migrate(text: str, path: str, ruleset: RuleSet) -> FileOutcome:
    outcome = FileOutcome(path)
    if skips_file(text):
        return outcome
    if path.endswith(SHELL_SUFFIXES):
        return _migrate_shell(text, path, ruleset, outcome)
    pattern = ruleset.python_filter
    if pattern is not None and not pattern.search(text):
        return outcome
    tree = _parse_ast(text, path, outcome)
    if tree is None:
        return outcome
    context = RuleContext(path, text, FileFacts.from_tree(tree), ruleset.options,
                          Suppressions.parse(text))
    rules = {cls: cls(context) for cls in ruleset.matching(ruleset.python, text)}
    pieces = []
    for start_line, chunk in split_chunks(text, tree):
        chosen = [rules[cls] for cls in ruleset.matching(rules, chunk)]
        if not chosen:
            pieces.append(chunk)
            continue
        try:
            module = cst.parse_module(chunk)
        except cst.ParserSyntaxError as exc:
            outcome.error = (f"{path}:{exc.raw_line + start_line - 1}:{exc.raw_column + 1}: "
                             f"LibCST cannot parse this (file left untouched): {exc.message}")
            return outcome
        outcome.parsed = True
        new_module = RuleRunner(chosen).run(module, start_line - 1)
        pieces.append(new_module.code if new_module is not module else chunk)
    new_text = "".join(pieces)
    needs_npu = any(e.code in {r.code for r in rules if r.needs_torch_npu} for e in context.edits)
    adds_import = any(getattr(r, "adds_torch_npu_import", False) for r in ruleset.rules)
    wanted = set(context.imports)
    if needs_npu and adds_import:
        wanted.add(("torch_npu", None, None))
    if wanted and context.edits:
        new_text, added, line = insert_imports(new_text, context.facts, sorted(wanted, key=_import_order))
        for text_added in added:
            context.edits.append(Edit("NPU100", f"added `{text_added}`", line, 1))
            line += 1
    outcome.edits = sorted(context.edits, key=lambda e: (e.line, e.col))
    outcome.diagnostics = _unsuppressed(context)
    if new_text != text:
        problem = _reparse_problem(new_text)
        if problem:
            outcome.error = (f"{path}:{problem}: the rewrite would not parse; file left untouched "
                             "(please report this as a bug)")
            outcome.edits = []
            return outcome
        outcome.new_text = new_text
    return outcome


def _import_order(item: tuple[str, str | None, str | None]) -> tuple[int, str]:
    return (0 if item[0] == "torch_npu" else 1, repr(item))


def _migrate_shell(text: str, path: str, ruleset: RuleSet, outcome: FileOutcome) -> FileOutcome:
    pattern = ruleset.shell_filter
    if pattern is not None and not pattern.search(text):
        return outcome
    context = RuleContext(path, text, FileFacts(ast.Module(body=[], type_ignores=[])),
                          ruleset.options, Suppressions.parse(text))
    new_text = text
    for cls in ruleset.matching(ruleset.shell, text):
        new_text = cls(context).rewrite_text(new_text)
    outcome.edits = sorted(context.edits, key=lambda e: (e.line, e.col))
    outcome.diagnostics = _unsuppressed(context)
    if new_text != text:
        outcome.new_text = new_text
    return outcome


def _unsuppressed(context: RuleContext) -> list[Diagnostic]:
    found = [d for d in context.diagnostics if not context.suppressions.suppresses(d.code, d.line)]
    return sorted(found, key=lambda d: (d.line, d.col, d.code))


def _parse_ast(text: str, path: str, outcome: FileOutcome) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours to print
        try:
            return ast.parse(text, filename=path)
        except SyntaxError as exc:
            outcome.error = f"{path}:{exc.lineno or 0}:{exc.offset or 0}: syntax error: {exc.msg}"
        except (ValueError, RecursionError, MemoryError) as exc:
            outcome.error = f"{path}:0:0: cannot parse: {exc}"
    return None


def _reparse_problem(text: str) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except SyntaxError as exc:
            return f"{exc.lineno or 0}:{exc.offset or 0}"
    return None


def split_chunks(text: str, tree: ast.Module) -> list[tuple[int, str]]:
    """Cut the text at top-level statement starts: [(first line, chunk text)]. Comments and
    blank lines before a statement belong to it; the chunks concatenate back to the text."""
    starts = []
    for stmt in tree.body:
        line = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        if not starts or line > starts[-1]:
            starts.append(line)
    if not starts:
        return [(1, text)]
    lines = split_lines(text)
    starts[0] = 1
    bounds = starts + [len(lines) + 1]
    return [(a, "".join(lines[a - 1:b - 1])) for a, b in zip(bounds, bounds[1:])]


def migrate_source(text: str, path: str = "<string>", select: Iterable[str] = (),
                   ignore: Iterable[str] = (), enable: Iterable[str] = (),
                   options: Mapping[str, Any] | None = None) -> str:
    """Convenience for tests and other wings: the migrated text (unchanged text if nothing to do).
    Raises ValueError when the file cannot be migrated."""
    from npu_migrate_codemods.registry import all_rules, select_rules

    ruleset = RuleSet(select_rules(all_rules(), select, ignore, enable), options)
    outcome = migrate_text(text, path, ruleset)
    if outcome.error:
        raise ValueError(outcome.error)
    return outcome.new_text if outcome.new_text is not None else text

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
from typing import Any

import libcst as cst

from codemods.analyses.portable import define_device, guard_import
from codemods.api.prefilter import Prefilter, TextWords
from codemods.api.rule import TEXT_LANGUAGES, LineSpans, Rule, RuleContext
from codemods.api.runner import RuleRunner, handled_nodes
from codemods.api.selectors import SWITCHED_OFF as SWITCHED_OFF  # its home; imported from here too
from codemods.api.selectors import switched_off_option
from codemods.api.suppression import Suppressions, skips_file
from codemods.api.targets import plan_rules, report_instead, target_of
from codemods.model.facts import FileFacts
from codemods.model.filemodel import FileModel
from codemods.model.imports import insert_imports, is_settings_module, split_lines
from npu_migrate.apply import grammar
from npu_migrate.apply.notebook_run import migrate_notebook
from npu_migrate.apply.pieces import Piece, PieceMatch, cuttable_blocks, dedent_piece, plan_pieces
from npu_migrate.apply.outcome import FileOutcome as FileOutcome  # its home; imported from here too
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity
from npu_migrate.core.discovery import interpreter_of, manifest_name, script_language
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX

UNKNOWN_SUPPRESSION = "NPU001"
PYTHON_SOURCE_SUFFIXES = (".py", ".pyi", ".pyw")
MALFORMED_SUPPRESSION = "NPU002"


class RuleSet:
    """The selected rules of a run, split by language, with their combined prefilters."""

    def __init__(self, rules: Sequence[type[Rule]], options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        from codemods.api.registry import all_rules

        running, self.report_only = plan_rules(list(rules), target_of(self.options), all_rules())
        self.rules = running + self.report_only
        self.python = [r for r in self.rules if r.language == "python"]
        self.text_rules = {language: [r for r in self.rules if r.language == language]
                           for language in TEXT_LANGUAGES}
        compiled: dict[str, Prefilter] = {}  # rules sharing a prefilter share its compiled form
        self._single = {r: (compiled.setdefault(pattern, Prefilter(pattern)) if pattern else None)
                        for r in self.rules for pattern in [_prefilter_of(r, self.options)]}
        self.text_filters = {language: Prefilter.union(self._single[r] for r in rules)
                             for language, rules in self.text_rules.items()}
        self._switched_off: RuleSet | None = None

    def switched_off(self) -> RuleSet | None:
        """The default Python rules the run's `ignore` lists switched off (None: none), to tell
        what they would have handled; built on first use."""
        codes = set(self.options.get(SWITCHED_OFF, ()))
        if not codes:
            return None
        if self._switched_off is None:
            from codemods.api.registry import all_rules

            rules = [r for r in all_rules() if r.code in codes and r.default and r.language == "python"
                     and not getattr(r, "final_sweep", False)]
            options = {key: value for key, value in self.options.items() if key != SWITCHED_OFF}
            self._switched_off = RuleSet(rules, options)
        return self._switched_off

    def codes(self) -> list[str]:
        return [r.code for r in self.rules]

    def matching(self, rules: Iterable[type[Rule]], text: str) -> list[type[Rule]]:
        """The rules whose prefilter matches `text`. Each distinct prefilter is searched once, and
        each of their gate words looked for once (see `codemods.api.prefilter`): separate
        simple searches beat one big alternation, which defeats `re`'s literal scan."""
        found: list[type[Rule]] = []
        hits: dict[int, bool] = {}
        words = TextWords(text)
        for rule in rules:
            prefilter = self._single[rule]
            if prefilter is None:
                found.append(rule)
                continue
            hit = hits.get(id(prefilter))
            if hit is None:
                hit = hits[id(prefilter)] = prefilter.search(text, words)
            if hit:
                found.append(rule)
        return found

    def chunk_filters(self, rules: Iterable[type[Rule]], facts: FileFacts) -> dict[type[Rule], Prefilter | None]:
        """Per-rule patterns for the pieces of one file: the rule's prefilter, or a local name
        that this file binds to something the prefilter matches (`from torch.cuda import
        synchronize` makes a bare `synchronize()` elsewhere in the file worth parsing)."""
        filters = {}
        for rule in rules:
            prefilter = self._single[rule]
            if prefilter is not None:
                aliases = [local for local, target in facts.aliases.items()
                           if local != target and prefilter.search(target)]
                if aliases:
                    names = "|".join(sorted(map(re.escape, aliases)))
                    prefilter = Prefilter.union([prefilter, Prefilter(f"\\b(?:{names})\\b")])
            filters[rule] = prefilter
        return filters

    def suffixes(self) -> tuple[str, ...]:
        """The file suffixes this rule set has something to say about."""
        found: tuple[str, ...] = (".py", NOTEBOOK_SUFFIX) if self.python else ()
        for language, rules in self.text_rules.items():
            found += TEXT_LANGUAGES[language] if rules else ()
        return found


def _prefilter_of(rule: type[Rule], options: Mapping[str, Any]) -> str:
    """The rule's prefilter, widened by what the project facts in `options` name for it."""
    extra = rule.project_prefilter(options) if rule.prefilter else None
    return f"{rule.prefilter}|{extra}" if extra else rule.prefilter


def language_of(path: str, text: str = "") -> str:
    """The language a file is read as: by its suffix; a file of another suffix (named on the
    command line) by its `#!` line: a shell script as shell, a script of another interpreter as
    "other" (left alone); else Python."""
    for language, suffixes in TEXT_LANGUAGES.items():
        # `.txt` / YAML files are manifests only by their name; another one named explicitly is
        # read as Python, as any file of an unknown suffix
        if path.endswith(suffixes) and (language != "manifest" or manifest_name(path)):
            return language
    if not path.endswith(PYTHON_SOURCE_SUFFIXES) and text.startswith("#!"):
        by_line = script_language(text.split("\n", 1)[0])
        if by_line in ("shell", "other"):
            return by_line
    return "python"


def migrate_text(text: str, path: str, ruleset: RuleSet, tree: ast.Module | None = None) -> FileOutcome:
    """Migrate one file's decoded text. Never raises: errors land in `error`, and the file
    is left as it was. `tree`, when the caller has already parsed `text` with `ast`, saves a parse."""
    if path.endswith(NOTEBOOK_SUFFIX):  # code cells as one Python text (issue 14)
        shell = (lambda code, name: _migrate_text_rules(code, name, ruleset, "shell", FileOutcome(name))) \
            if ruleset.text_rules.get("shell") else None
        return migrate_notebook(text, path, lambda code, name: migrate_text(code, name, ruleset), FileOutcome, shell)
    try:
        try:
            outcome = _migrate(text, path, ruleset, tree=tree)
        except _Replan:
            outcome = _migrate(text, path, ruleset, nest=False, tree=tree)
        if not outcome.error and "npu-migrate" in text and not skips_file(text):
            outcome.diagnostics += unknown_suppressions(text, path)
        return outcome
    except RecursionError:
        return FileOutcome(path, error=f"{path}:0:0: too deeply nested to migrate; file left untouched")
    except Exception as exc:  # a bug in a rule must cost one file, not the run
        return FileOutcome(path, error=f"{path}:0:0: internal error ({type(exc).__name__}: {exc}); "
                                       "file left untouched (please report this as a bug)")


def _migrate(text: str, path: str, ruleset: RuleSet, nest: bool = True,
             tree: ast.Module | None = None) -> FileOutcome:
    outcome = FileOutcome(path)
    if skips_file(text):
        return outcome
    language = language_of(path, text)
    if language == "other":
        program = interpreter_of(text.split("\n", 1)[0])
        outcome.note = f"{path}: skipped: a {program} script (its #! line): not Python, shell or CUDA"
        return outcome
    if language != "python":
        return _migrate_text_rules(text, path, ruleset, language, outcome)
    candidates = ruleset.matching(ruleset.python, text)
    # final-sweep rules (NPU599) look at the migrated text once, after every other rule
    sweeps = [cls for cls in candidates if getattr(cls, "final_sweep", False)]
    candidates = [cls for cls in candidates if cls not in sweeps]
    if not candidates and not sweeps:
        return outcome
    tree = tree or _parse_ast(text, path, outcome)
    if tree is None:
        return outcome
    context = RuleContext(FileModel(path, text, tree, ruleset.options), Suppressions.parse(text))
    rules = {cls: cls(context) for cls in candidates}
    for cls, rule in rules.items():
        rule.report_only = cls in ruleset.report_only
    runners: dict[tuple[Rule, ...], RuleRunner] = {}
    try:
        return _run_rules(text, path, ruleset, nest, tree, sweeps, context, rules, runners, outcome)
    finally:
        _release(context, rules.values(), runners.values())


def _release(context: RuleContext, rules: Iterable[Rule], runners: Iterable[RuleRunner]) -> None:
    """Break the file's reference cycles (runner <-> rule, analyses that keep their model), so
    its trees are freed as soon as it is done rather than left for the cyclic collector, which
    would have to walk every node of them first."""
    for runner in runners:
        runner.release()
    for rule in rules:
        rule.runner = None
    context.model.release()
    context.module = None


def _run_rules(text: str, path: str, ruleset: RuleSet, nest: bool, tree: ast.Module,
               sweeps: list[type[Rule]], context: RuleContext, rules: dict[type[Rule], Rule],
               runners: dict[tuple[Rule, ...], RuleRunner], outcome: FileOutcome) -> FileOutcome:
    # each rule's own gate, read on the `ast` model: where in this file it can act (Rule.target_lines)
    spans = {cls: LineSpans(found) for cls, rule in rules.items() if (found := rule.target_lines()) is not None}
    rules = {cls: rule for cls, rule in rules.items() if spans.get(cls, True)}
    lines = split_lines(text)
    whole = not nest or any(cls.whole_statements for cls in rules)
    chunk_filters = ruleset.chunk_filters(rules, context.facts)
    in_code = {cls for cls in rules if cls.prefilter_in_code and chunk_filters[cls] is not None}
    code_lines = context.model.code_lines(lines) if in_code else lines
    if code_lines is lines:
        in_code = set()
    match = PieceMatch(lines, Prefilter.union(f for cls, f in chunk_filters.items() if cls not in in_code),
                        code_lines, Prefilter.union(chunk_filters[cls] for cls in in_code) if in_code else None,
                        cuttable_blocks(handled_nodes(rules, target_of(ruleset.options))))
    pieces = []
    for piece in plan_pieces(lines, tree.body, 1, len(lines) + 1, "", match, nest=not whole):
        chunk = "".join(lines[piece.start - 1:piece.end - 1])
        if not piece.parse:
            pieces.append(chunk)
            continue
        code = "".join(code_lines[piece.start - 1:piece.end - 1]) if in_code else chunk
        chosen = tuple(rule for cls, rule in rules.items()
                       if ((prefilter := chunk_filters[cls]) is None
                           or prefilter.search(code if cls in in_code else chunk))
                       and (cls not in spans or spans[cls].meets(piece.start, piece.end)))
        if not chosen:
            pieces.append(chunk)
            continue
        runner = runners.get(chosen)
        if runner is None:  # building one costs a scan of every rule's methods: once per subset
            runner = runners[chosen] = RuleRunner(chosen)
        new_chunk = _run_piece(piece, chunk, runner, context, outcome)
        if new_chunk is None:
            return outcome
        pieces.append(new_chunk)
    new_text = "".join(pieces)
    npu_codes = {r.code for r in rules if r.needs_torch_npu}
    npu_lines = [e.line for e in context.edits if e.code in npu_codes]
    needs_npu = target_of(ruleset.options) == "npu" and bool(npu_lines)
    adds_import = any(r.adds_torch_npu_import for r in ruleset.rules)
    wanted = {item for item in context.imports if not _provided_elsewhere(item, context.model)}
    if needs_npu and adds_import:
        if is_settings_module(context.facts):  # the code that reads these values imports it
            first = min((e for e in context.edits if e.code in npu_codes), key=lambda e: (e.line, e.col))
            context.diagnostics.append(Diagnostic(
                "NPU100", "`import torch_npu` is not added here: this file only assigns values (a config "
                "file, whose every module-level name becomes a setting when it is loaded); the code that "
                "reads these values must import torch_npu", path, first.line, first.col, Severity.INFO))
        else:
            wanted.add(("torch_npu", None, None))
    if wanted and context.edits:
        new_text, added, line = insert_imports(new_text, context.facts, sorted(wanted, key=_import_order),
                                               min(npu_lines, default=None))
        for text_added in added:
            context.edits.append(Edit("NPU100", f"added `{text_added}`", line, 1))
            line += 1
    if target_of(ruleset.options) == "portable":
        guard_import(context)
    if context.definitions and context.edits:
        new_text, line = define_device(new_text, context.definitions)
        if line:
            context.edits.append(Edit("NPU100", "added the module-level statements the rewrite needs after the imports", line, 1))
    # the rewrite is parsed once: to check it, and for the sweep to read
    new_tree, problem = _reparse(new_text) if new_text != text else (None, None)
    for cls in sweeps:
        cls(context).sweep(new_text, new_tree)  # type: ignore[attr-defined]
    if sweeps:
        _drop_sweeps_where_switched_off(context, {cls.code for cls in sweeps}, text, path, ruleset, tree)
    outcome.edits = sorted(context.edits, key=lambda e: (e.line, e.col))
    outcome.diagnostics = _unsuppressed(context)
    if new_text != text:
        if problem:
            outcome.error = (f"{path}:{problem}: the rewrite would not parse; file left untouched "
                             "(please report this as a bug)")
            outcome.edits = []
            return outcome
        outcome.new_text = new_text
    return outcome


def _drop_sweeps_where_switched_off(context: RuleContext, sweep_codes: set[str], text: str, path: str,
                                    ruleset: RuleSet, tree: ast.Module) -> None:
    """A rule switched off by `--ignore`, the configuration or per-file-ignores is a decision about
    the lines it handles: the final sweep's "no rule handled it" is not said there."""
    if not any(d.code in sweep_codes for d in context.diagnostics):
        return
    off = ruleset.switched_off()
    if off is None or not off.rules:
        return
    would = migrate_text(text, path, off, tree=tree)
    decided = {e.line for e in would.edits} | {d.line for d in would.diagnostics}
    context.diagnostics = [d for d in context.diagnostics if d.code not in sweep_codes or d.line not in decided]


def _provided_elsewhere(item: tuple[str, str | None, str | None], model: FileModel) -> bool:
    """Whether the file already uses, without importing it, the name an import would bind (a star
    import or a launcher provides it). Adding `import torch` there would let every rule read the
    file's `torch.cuda.*` as torch's on the next run, which would change the file again (issue 29);
    the inserted code uses the name as the file does. `torch_npu` is always imported: loading it
    is what makes the device exist."""
    module, name, asname = item
    local = asname or name or module.split(".")[0]
    if module == "torch_npu" or local in model.facts.aliases:
        return False
    return any(isinstance(node, ast.Name) and node.id == local for node in model.of_type(ast.Name))


def _import_order(item: tuple[str, str | None, str | None]) -> tuple[int, str]:
    return (0 if item[0] == "torch_npu" else 1, repr(item))


def _migrate_text_rules(text: str, path: str, ruleset: RuleSet, language: str,
                        outcome: FileOutcome) -> FileOutcome:
    """Shell scripts and CUDA sources: line-based rules over the text."""
    prefilter = ruleset.text_filters[language]
    if prefilter is not None and not prefilter.search(text):
        return outcome
    context = RuleContext(FileModel.empty(path, text, ruleset.options), Suppressions.parse(text))
    new_text = text
    for cls in ruleset.matching(ruleset.text_rules[language], text):
        if cls in ruleset.report_only:  # its rewrite is dropped; what it would do is reported
            made = len(context.edits)
            cls(context).rewrite_text(new_text)
            context.diagnostics += [report_instead(edit, path, cls) for edit in context.edits[made:]]
            del context.edits[made:]
            continue
        new_text = cls(context).rewrite_text(new_text)
    outcome.edits = sorted(context.edits, key=lambda e: (e.line, e.col))
    outcome.diagnostics = _unsuppressed(context)
    if new_text != text:
        outcome.new_text = new_text
    return outcome


def unknown_suppressions(text: str, path: str) -> list[Diagnostic]:
    """NPU001 (like ruff's RUF100): a code in `# npu-migrate: ignore[...]` that no rule has, so
    the comment silences nothing (a typo, or a rule that was removed); NPU002: a malformed one."""
    from codemods.api.registry import all_rules
    from npu_migrate.apply.data_tables import TABLES
    from npu_migrate.core.codes import entries
    from npu_migrate.core.config import did_you_mean

    known = [r.code for r in all_rules()] + list(entries(TABLES))
    suppressions = Suppressions.parse(text)
    found = [Diagnostic(MALFORMED_SUPPRESSION, f"malformed suppression comment: {why}", path, line, col,
                        Severity.WARNING) for line, col, why in suppressions.malformed]
    for line, col, code in suppressions.unknown(frozenset(known)):
        close = did_you_mean(code, known)
        hint = f"; did you mean {close}?" if close else ""
        found.append(Diagnostic(UNKNOWN_SUPPRESSION, f"unknown code `{code}` in a suppression comment "
                                f"(it silences nothing){hint}", path, line, col, Severity.WARNING))
    return sorted(found, key=lambda d: (d.line, d.col))


def _unsuppressed(context: RuleContext) -> list[Diagnostic]:
    found = [d for d in context.diagnostics if not context.suppressions.suppresses(d.code, d.line)]
    return sorted(found, key=lambda d: (d.line, d.col, d.code))


def _parse_ast(text: str, path: str, outcome: FileOutcome) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours to print
        try:
            return ast.parse(text, filename=path)
        except SyntaxError as exc:
            newer = grammar.ast_of_newer_syntax(text, exc)  # newer Python than the one running us?
            if newer is not None:
                return newer
            limit = " (beyond what any CPython compiles)" if grammar.beyond_cpython_limits(exc) else ""
            outcome.error = f"{path}:{exc.lineno or 0}:{exc.offset or 0}: syntax error: {exc.msg}{limit}"
        except (ValueError, RecursionError, MemoryError) as exc:
            outcome.error = f"{path}:0:0: cannot parse: {exc}"
    return None


def _reparse(text: str) -> tuple[ast.Module | None, str | None]:
    """The rewritten text's tree (None if this Python cannot parse it) and, if it is not valid
    Python at all, where it breaks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text), None
        except SyntaxError as exc:
            return None, None if grammar.is_valid_python(text) else f"{exc.lineno or 0}:{exc.offset or 0}"
        except (ValueError, RecursionError, MemoryError):
            return None, None


def _run_piece(piece: Piece, chunk: str, runner: RuleRunner, context: RuleContext,
               outcome: FileOutcome) -> str | None:
    """Parse and transform one piece; None (with outcome.error set) when LibCST cannot parse it."""
    chunk_lines = split_lines(chunk)
    removed: list[int] = []
    source = chunk
    if piece.indent:
        dedented = dedent_piece(chunk_lines, piece.indent)
        if dedented is None:
            raise _Replan()
        source, removed = dedented
    try:
        module = grammar.parse_module(source)
    except cst.ParserSyntaxError as exc:
        if piece.indent or piece.part:
            raise _Replan() from None
        outcome.error = (f"{outcome.path}:{exc.raw_line + piece.start - 1}:{exc.raw_column + 1}: "
                         f"LibCST cannot parse this (file left untouched): {exc.message}")
        return None
    if source.endswith("\r") and not module.has_trailing_newline:
        # LibCST 1.9 takes a module's final lone CR for a missing newline and drops it from
        # `code`; every piece of a CR-only file ends that way (`x = a.cuda()\r[0]` lost its `\r`)
        module = module.with_changes(has_trailing_newline=True)
    outcome.parsed = True
    context.removed_lines = set()
    new_module, items = runner.run(module, piece.start - 1, removed)
    new_source = new_module.code if new_module is not module else source
    if new_source == source:
        new_source = chunk
    elif piece.indent:
        new_lines = split_lines(new_source)
        # the lines that stay, each to get its own indentation back (a rule may drop whole lines)
        kept = [at for at in range(len(chunk_lines)) if at + 1 not in context.removed_lines]
        if len(new_lines) != len(kept):
            raise _Replan()  # a rule added or joined lines: re-run on the whole statement to indent them right
        new_source = "".join(chunk_lines[at][:removed[at]] + new for at, new in zip(kept, new_lines))
    for item in items:
        if isinstance(item, Edit):
            context.edits.append(item)
        else:
            context.diagnostics.append(item)
    return new_source


class _Replan(Exception):
    """A nested piece cannot be handled on its own: migrate the file without nesting."""


def migrate_source(text: str, path: str = "<string>", select: Iterable[str] = (),
                   ignore: Iterable[str] = (), enable: Iterable[str] = (),
                   options: Mapping[str, Any] | None = None) -> str:
    """Convenience for tests and other wings: the migrated text (unchanged text if nothing to do).
    Raises ValueError when the file cannot be migrated."""
    from codemods.api.registry import all_rules, select_rules

    ignore = list(ignore)
    ruleset = RuleSet(select_rules(all_rules(), select, ignore, enable), {**(options or {}), **switched_off_option(all_rules(), ignore)})
    outcome = migrate_text(text, path, ruleset)
    if outcome.error:
        raise ValueError(outcome.error)
    return outcome.new_text if outcome.new_text is not None else text

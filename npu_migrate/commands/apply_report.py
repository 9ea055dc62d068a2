"""What `npu-migrate apply` prints: results (diffs, diagnostics in the chosen output format,
the whole-run reports) on stdout or --output-file; the summary, the exit reason and the progress
bar on stderr, through one rich console while the bar is shown."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import click

from npu_migrate import __version__
from npu_migrate.apply.runner import FileResult
from npu_migrate.apply.summary import RunSummary
from npu_migrate.commands.progress import TerminalProgress
from npu_migrate.core import formats
from npu_migrate.core.diagnostics import Diagnostic, Severity
from npu_migrate.core.diffs import colourise, unified_diff

PROGRESS_LABEL = {"write": "migrating", "check": "checking", "diff": "checking",
                  "dry-run": "checking", "add-noqa": "adding suppressions"}
MACHINE_FORMATS = ("json", "sarif", "gitlab")  # one document on stdout, no human summary


def findings(result: FileResult, pending: bool) -> list[Diagnostic]:
    """What a file reports: its failure (NPU000), its diagnostics, and, when nothing is written
    (check/diff/dry-run), each pending rewrite as a `fixable` warning."""
    from npu_migrate.apply.sarif_run import failure_diagnostic

    outcome = result.outcome
    found = [failure_diagnostic(outcome.error, outcome.path)] if outcome.error else []
    if pending:
        found += [Diagnostic(e.code, f"fixable: {e.message}", outcome.path, e.line, e.col,
                             Severity.WARNING) for e in outcome.edits]
    found += outcome.diagnostics
    return sorted(found, key=lambda d: (d.line, d.col, d.code))


def render_report(fmt: str, results: list[FileResult], summary: RunSummary, pending: bool) -> str:
    """The whole-run formats: json, sarif, gitlab, grouped."""
    if fmt == "json":
        payload = {"version": __version__, "files": [_file_json(r) for r in results],
                   "summary": summary.to_dict()}
        return json.dumps(payload, indent=2) + "\n"
    if fmt == "sarif":
        from npu_migrate.apply.sarif_run import run_to_sarif

        return json.dumps(run_to_sarif(results), indent=2) + "\n"
    diagnostics = [d for r in results for d in findings(r, pending)]
    if fmt == "gitlab":
        return formats.gitlab(diagnostics)
    if fmt == "grouped":
        return formats.grouped(diagnostics)
    return "".join(line + "\n" for line in formats.streamed_lines(diagnostics, fmt))


def _file_json(result: FileResult) -> dict[str, Any]:
    outcome = result.outcome
    return {"path": outcome.path, "changed": outcome.changed, "error": outcome.error,
            "edits": [e.to_dict() for e in outcome.edits],
            "diagnostics": [d.to_dict() for d in outcome.diagnostics]}


class Reporter:
    """Prints as results arrive (bounded memory); whole-run formats keep only the small
    per-file records, never the texts. Results go to stdout (or --output-file); the summary
    and the progress bar go to stderr, through one rich console while the bar is shown."""

    def __init__(self, mode: str, fmt: str, no_color: bool, show_fixes: bool, quiet: bool,
                 total: int, output: TextIO, statistics: bool = False) -> None:
        self.mode, self.fmt, self.show_fixes, self.quiet = mode, fmt, show_fixes, quiet
        self.output, self.statistics = output, statistics
        self.pending = mode in ("check", "diff", "dry-run", "add-noqa")
        self.colour = not no_color and _isatty(output) and "NO_COLOR" not in os.environ
        self.records: list[FileResult] = []
        self.rows: list[tuple[str, str, str]] = []
        self.severities = formats.severity_counts([])
        self.total = total
        self.progress = TerminalProgress(enabled=not quiet)
        # diffs own stdout in diff modes; diagnostics then go to stderr so the diff stays a patch
        self.diag_err = mode in ("diff", "dry-run") and output is sys.stdout

    # -- progress ---------------------------------------------------------------------------
    def track(self, results: Iterator[FileResult]) -> Iterator[FileResult]:
        self.progress.start(PROGRESS_LABEL[self.mode], self.total)
        for result in results:
            yield result
            self.progress.advance()

    def close(self) -> None:
        self.progress.stop()

    def _echo(self, text: str, err: bool = False, ansi: bool = False) -> None:
        """One piece of output. While the bar is on a terminal, output for that terminal is
        printed through the bar's console (which lifts the bar over it) but still to its own
        stream; output for a file or pipe never sees a control code."""
        stream = sys.stderr if err else self.output
        if not self.progress.active or not _isatty(stream):
            click.echo(text, file=stream, nl=not ansi, color=ansi or None)
            return
        from rich.text import Text

        console = self.progress.console
        console.file = stream
        try:
            console.print(Text.from_ansi(text) if ansi else text, markup=False, highlight=False,
                          soft_wrap=True, end="" if ansi else "\n")
        finally:
            console.file = sys.stderr

    # -- per file ---------------------------------------------------------------------------
    def file(self, result: FileResult) -> None:
        outcome = result.outcome
        self.severities.update(formats.severity_counts(outcome.diagnostics))
        keep = self.mode == "add-noqa" or self.fmt not in formats.STREAMED
        if keep and (outcome.changed or outcome.diagnostics or outcome.error or outcome.edits):
            self.records.append(FileResult(outcome))
        found = findings(result, self.pending and self.fmt != "text")
        if self.statistics:
            self._count(result, found)
        if self.fmt not in formats.STREAMED or self.statistics:
            return
        if result.old_text is not None and outcome.new_text is not None and self.mode in ("diff", "dry-run"):
            diff = unified_diff(result.old_text, outcome.new_text, outcome.path)
            colour = self.mode == "dry-run" and self.colour
            self._echo(colourise(diff) if colour else diff, ansi=True)
        elif outcome.changed and self.mode == "check" and self.fmt == "text":
            self._echo(f"would migrate {outcome.path}")
        if self.fmt == "text":
            if outcome.error:
                self._echo(outcome.error, err=True)
            if outcome.note:  # a link, FIFO or device, skipped
                self._echo(outcome.note, err=True)
            found = outcome.diagnostics
        for line in formats.streamed_lines(found, self.fmt):
            self._echo(line, err=self.diag_err)
        if outcome.edits and (self.show_fixes or self.mode == "dry-run") and self.fmt == "text":
            verb = "fixed" if self.mode == "write" else "would fix"
            for edit in outcome.edits:
                self._echo(f"{outcome.path}:{edit.line}:{edit.col}: {edit.code} {verb}: {edit.message}",
                           err=self.diag_err)

    def _count(self, result: FileResult, found: list[Diagnostic]) -> None:
        names = _rule_names()
        for d in found:
            if not d.message.startswith("fixable: "):
                self.rows.append((d.code, d.severity.value, names.get(d.code, "")))
        verb = "fixable" if self.pending else "fixed"
        for edit in result.outcome.edits:
            self.rows.append((edit.code, verb, names.get(edit.code, "")))

    def add_noqa(self) -> None:
        from npu_migrate.apply.add_noqa import add_suppressions

        for record in self.records:
            diagnostics = record.outcome.diagnostics
            if not diagnostics or record.outcome.error:
                continue
            added, problem = add_suppressions(record.path, diagnostics)
            if problem:
                self._echo(f"{record.path}: {problem}", err=True)
            elif added:
                self._echo(f"{record.path}: added {added} suppression(s)", err=True)

    def finish(self, summary: RunSummary, seconds: float) -> None:
        if self.statistics:
            lines = formats.statistics(self.rows)
            if self.fmt == "json":
                self.output.write(json.dumps([{"count": int(line.split()[0]), "code": line.split()[1]}
                                              for line in lines], indent=2) + "\n")
            else:
                self.output.write("".join(line + "\n" for line in lines))
        elif self.fmt not in formats.STREAMED:
            self.output.write(render_report(self.fmt, self.records, summary, self.pending))
        self.output.flush()
        if self.quiet or self.fmt in MACHINE_FORMATS:
            return
        verb = {"write": "migrated", "check": "would change", "diff": "would change",
                "dry-run": "would change", "add-noqa": "would change"}[self.mode]
        for line in summary.lines(verb):
            click.echo(line, err=True)
        click.echo(formats.severity_line(self.severities), err=True)
        click.echo(f"done in {seconds:.2f} s", err=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _rule_names() -> dict[str, str]:
    from codemods.api.registry import all_rules

    return {"NPU000": "file-failed", "NPU001": "unknown-suppression-code",
            "NPU002": "malformed-suppression"} | {
        r.code: r.name for r in all_rules()}

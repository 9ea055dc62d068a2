"""`npu-migrate apply`: rewrite CUDA code for Ascend NPUs, or show / check what would change.

A thin command: it parses the options, asks the apply wing for the run
(`npu_migrate/apply/session.py`: settings → plan → read → cache → migrate → store), prints what
comes back through the reporter and exits with the documented code."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import click

from npu_migrate.apply.cache import DEFAULT_DIR
from npu_migrate.apply.plan import Planner, plan_for
from npu_migrate.apply.runner import RunPlan, process_bytes
from npu_migrate.apply.selection import SelectionError
from npu_migrate.apply.session import ApplyRequest, ApplyRun, prepare
from npu_migrate.apply.summary import RunSummary, package_of
from npu_migrate.commands.apply_report import MACHINE_FORMATS, Reporter, findings, render_report
from npu_migrate.commands.progress import TerminalProgress
from npu_migrate.core import formats
from npu_migrate.core.config import TARGETS, ConfigError, SettingsFinder, show_settings
from npu_migrate.core.diffs import colourise, unified_diff
from npu_migrate.core.discovery import output_dir_problem
from npu_migrate.core.parallel import collect_less_often, exit_now, exit_status, stop_on_signals

EXIT_OK, EXIT_PENDING, EXIT_FATAL = 0, 1, 2
_plan = plan_for  # one configuration's plan (tests build plans with it)


class Fatal(click.ClickException):
    exit_code = EXIT_FATAL

    def show(self, file: Any = None) -> None:
        click.echo(f"npu-migrate: error: {self.format_message()}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Rewrite the files in place (the default mode; ruff's spelling).")
@click.option("--dry-run", is_flag=True, help="Print a coloured diff of what would change; write nothing.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a plain unified diff; exit 1 if anything would change.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--add-noqa", is_flag=True, help="Write nothing but `# npu-migrate: ignore[CODE]` on each line with a diagnostic.")
@click.option("--select", multiple=True, help="Rule codes, prefixes or names to run instead of the defaults (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes, prefixes or names to skip.")
@click.option("--enable", multiple=True, help="Opt-in rules to add (e.g. amp,pin-memory,memory-snapshot).")
@click.option("--target", type=click.Choice(TARGETS), help="npu: torch_npu code; portable: device-generic code for CUDA, Ascend and CPU [default: npu; config: target].")
@click.option("--target-version", metavar="X.Y", help="The oldest torch the migrated code must run on [config: target-version].")
@click.option("--exclude", multiple=True, help="Glob of files or folders to leave out (repeatable).")
@click.option("--output-dir", type=click.Path(file_okay=False), help="Write a migrated copy here; leave the sources untouched.")
@click.option("--output-format", type=click.Choice(formats.FORMATS), help="How to print diagnostics [default: text].")
@click.option("--format", "legacy_format", type=click.Choice(["text", "json", "sarif"]), hidden=True,
              help="Deprecated: use --output-format.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False, writable=True),
              help="Write the diagnostics (or the JSON/SARIF/GitLab report) to this file instead of stdout.")
@click.option("--statistics", is_flag=True, help="Print counts per code instead of each diagnostic.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when files would change, failed, or have error-level diagnostics.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help=f"Cache location (default: {DEFAULT_DIR} beside the config, or here).")
@click.option("--changed-since", metavar="REV", help="Only files changed since this git revision.")
@click.option("--shard", metavar="K/N", help="Only the K-th of N deterministic shards of the file set.")
@click.option("--show-fixes", is_flag=True, help="List every edit made, with its rule code.")
@click.option("--show-files", is_flag=True, help="List the files that would be processed, then stop.")
@click.option("--show-settings", metavar="FILE", help="Print the settings that apply to FILE and where they come from, then stop.")
@click.option("--no-color", is_flag=True, help="No colours, even on a terminal.")
@click.option("--quiet", "-q", is_flag=True, help="Print diagnostics and errors only, no summary.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True),
              help="Read settings for every file from this pyproject.toml or npu-migrate.toml.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--stdin-filename", default="<stdin>", help="The name to use for code read from `-`.")
def command(paths: tuple[str, ...], fix: bool, dry_run: bool, show_diff: bool, check: bool,
            add_noqa: bool, select: tuple[str, ...], ignore: tuple[str, ...], enable: tuple[str, ...],
            exclude: tuple[str, ...], output_dir: str | None, output_format: str | None,
            legacy_format: str | None, output_file: str | None, statistics: bool, exit_zero: bool,
            jobs: int | None, no_cache: bool, cache_dir: str | None, changed_since: str | None,
            shard: str | None, show_fixes: bool, show_files: bool, show_settings: str | None,
            no_color: bool, quiet: bool, config_file: str | None, isolated: bool,
            stdin_filename: str, target: str | None = None, target_version: str | None = None) -> None:
    """Migrate PATHS (files or folders; `-` for standard input) from CUDA to Ascend NPUs.

    \b
    Each file gets the settings of its nearest pyproject.toml ([tool.npu-migrate]) or
    npu-migrate.toml, unless --config or --isolated is given.
    \b
    Exit codes: 0 nothing to do or done; 1 changes pending under --check/--diff/--dry-run,
    files that failed, or error-level diagnostics (0 with --exit-zero); 2 usage or fatal
    errors, or a PATH that does not exist (the other paths are still processed).
    """
    start = time.perf_counter()  # `done in` covers the whole command: finding files and project facts too
    collect_less_often()
    if legacy_format is not None:
        click.echo("npu-migrate: warning: --format is deprecated; use --output-format", err=True)
    fmt = output_format or legacy_format or "text"
    overrides = {key: value for key, value in (("target", target), ("target-version", target_version))
                 if value is not None}
    with _fatal_errors():
        finder = SettingsFinder(config_file, isolated)
        if show_settings is not None:
            click.echo(show_settings_of(finder, show_settings))
            return
    mode = _mode(paths, fix, dry_run, show_diff, check, add_noqa, output_dir)
    if paths == ("-",):
        named = stdin_filename if stdin_filename != "<stdin>" else os.path.join(".", "-")
        with _fatal_errors():
            plan = Planner(select, ignore, enable, overrides, cache_dir, no_cache)(finder.for_path(named))
        sys.exit(_run_stdin(plan, stdin_filename, dry_run, show_diff, check, fmt, no_color, exit_zero))
    existing = [p for p in paths if os.path.lexists(p)]
    for missing in (p for p in paths if p not in existing):
        click.echo(f"npu-migrate: error: {missing}: no such file or directory", err=True)
    request = ApplyRequest(existing, mode, select, ignore, enable, overrides, exclude, output_dir, changed_since,
                           shard, jobs, no_cache, cache_dir)
    with _fatal_errors(), TerminalProgress(enabled=not quiet and not show_files).preparing(
            "finding files, reading the project"):
        run = prepare(request, finder)
    if show_files:
        for file, _ in run.files:
            click.echo(file)
        sys.exit(EXIT_FATAL if len(existing) < len(paths) else EXIT_OK)
    if output_dir and (problem := output_dir_problem(existing, output_dir)):
        raise Fatal(problem)
    run.start()
    with _output(output_file) as output:
        reporter = Reporter(mode, fmt, no_color, show_fixes, quiet, len(run.files), output, statistics)
        summary = _report(run, reporter, existing, start)
    if len(existing) < len(paths):
        sys.exit(EXIT_FATAL)
    reasons = _exit_reasons(summary, mode)
    if reasons and not quiet and fmt not in MACHINE_FORMATS:
        click.echo(f"exit {EXIT_OK if exit_zero else EXIT_PENDING}: {'; '.join(reasons)}"
                   + (" (--exit-zero)" if exit_zero else ""), err=True)
    sys.exit(EXIT_PENDING if reasons and not exit_zero else EXIT_OK)


@contextlib.contextmanager
def _fatal_errors() -> Iterator[None]:
    """Configuration, selection and plugin errors end the run with one line and exit 2."""
    try:
        yield
    except (ConfigError, ValueError, SelectionError) as exc:
        raise Fatal(str(exc)) from None


def _mode(paths: Sequence[str], fix: bool, dry_run: bool, show_diff: bool, check: bool, add_noqa: bool,
          output_dir: str | None) -> str:
    if not paths:
        raise click.UsageError("give at least one PATH (a file, a folder, or - for standard input)")
    if sum([fix, dry_run, show_diff, check, add_noqa, output_dir is not None]) > 1:
        raise click.UsageError("--fix, --dry-run, --diff, --check, --add-noqa and --output-dir exclude each other")
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("`-` (standard input) cannot be mixed with other paths")
    return ("dry-run" if dry_run else "diff" if show_diff else "check" if check
            else "add-noqa" if add_noqa else "write")


@contextlib.contextmanager
def _output(output_file: str | None) -> Iterator[TextIO]:
    """Standard output, or the --output-file (closed at the end)."""
    if not output_file:
        yield sys.stdout
        return
    try:
        handle = open(output_file, "w", encoding="utf-8")  # noqa: SIM115  (closed by the `with` below)
    except OSError as exc:
        raise Fatal(f"--output-file {output_file}: {exc.strerror}") from None
    with handle:
        yield handle


def _report(run: ApplyRun, reporter: Reporter, existing: Sequence[str], start: float) -> RunSummary:
    """Print each result as it arrives; Ctrl-C, SIGTERM and SIGHUP stop between files."""
    summary = RunSummary()
    results = run.results()
    try:
        with stop_on_signals():
            for result in reporter.track(results):
                summary.add(result, package_of(result.path, list(existing)))
                reporter.file(result)
    except KeyboardInterrupt as interrupt:
        results.close()
        reporter.close()
        click.echo("npu-migrate: interrupted; files written so far are complete, the rest untouched. "
                   "Run again to finish.", err=True)
        exit_now(exit_status(interrupt), reporter.output)
    finally:
        reporter.close()
    if run.request.mode == "add-noqa":
        reporter.add_noqa()
    reporter.finish(summary, time.perf_counter() - start)
    return summary


def _exit_reasons(summary: RunSummary, mode: str) -> list[str]:
    reasons = []
    if summary.changed and mode in ("diff", "check", "dry-run"):
        reasons.append(f"{summary.changed} file(s) would change (--{mode})")
    if summary.failed:
        reasons.append(f"{summary.failed} file(s) failed")
    if summary.errors:
        reasons.append(f"{summary.errors} error-level diagnostic(s)")
    return reasons


def show_settings_of(finder: SettingsFinder, path: str) -> str:
    if not os.path.lexists(path):
        raise ConfigError(f"{path}: no such file or directory")
    return show_settings(finder.for_path(path))


def _run_stdin(plan: RunPlan, name: str, dry_run: bool, show_diff: bool, check: bool, fmt: str,
               no_color: bool, exit_zero: bool) -> int:
    data = sys.stdin.buffer.read()
    result = process_bytes(data, name, plan)
    outcome = result.outcome
    pending_mode = dry_run or show_diff or check
    if fmt not in formats.STREAMED:  # the report is the output
        summary = RunSummary()
        summary.add(result, ".")
        click.echo(render_report(fmt, [result], summary, pending_mode), nl=False)
    elif dry_run or show_diff:
        if result.old_text is not None and outcome.new_text is not None:
            diff = unified_diff(result.old_text, outcome.new_text, name)
            colour = dry_run and not no_color and sys.stdout.isatty()
            sys.stdout.write(colourise(diff) if colour else diff)
    elif not check:
        sys.stdout.buffer.write(result.new_bytes if result.new_bytes is not None else data)
    if fmt in formats.STREAMED:  # the code (or diff) owns stdout: diagnostics go to stderr
        found = outcome.diagnostics if fmt == "text" else findings(result, pending_mode)
        for line in formats.streamed_lines(found, fmt):
            click.echo(line, err=True)
        if outcome.error and fmt == "text":
            click.echo(outcome.error, err=True)
    failed = bool(outcome.error) or outcome.has_errors or (outcome.changed and pending_mode)
    return EXIT_PENDING if failed and not exit_zero else EXIT_OK

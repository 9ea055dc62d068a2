"""`npu-migrate apply`: rewrite CUDA code for Ascend NPUs, or show / check what would change."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from npu_migrate import __version__
from npu_migrate.apply.cache import DEFAULT_DIR, Cache, run_key
from npu_migrate.core.config import ConfigError, Settings, load_settings
from npu_migrate.core.diffs import colourise, unified_diff
from npu_migrate.core.discovery import copy_ignore, discover, output_dir_problem
from npu_migrate.apply.runner import FileResult, RunPlan, clean_stale_temps, process_bytes, run, write_back
from npu_migrate.apply.selection import SelectionError, changed_since, parse_shard, shard
from npu_migrate.core.parallel import exit_status, stop_on_signals
from npu_migrate.apply.summary import RunSummary, package_of

EXIT_OK, EXIT_PENDING, EXIT_FATAL = 0, 1, 2


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


class Fatal(click.ClickException):
    exit_code = EXIT_FATAL

    def show(self, file: Any = None) -> None:
        click.echo(f"npu-migrate: error: {self.format_message()}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--dry-run", is_flag=True, help="Print a coloured diff of what would change; write nothing.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a plain unified diff; exit 1 if anything would change.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--select", multiple=True, help="Rule codes, prefixes or names to run instead of the defaults (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes, prefixes or names to skip.")
@click.option("--enable", multiple=True, help="Opt-in rules to add (e.g. amp,pin-memory,memory-snapshot).")
@click.option("--exclude", multiple=True, help="Glob of files or folders to leave out (repeatable).")
@click.option("--output-dir", type=click.Path(file_okay=False), help="Write a migrated copy here; leave the sources untouched.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help=f"Cache location (default: {DEFAULT_DIR} beside the config, or here).")
@click.option("--changed-since", metavar="REV", help="Only files changed since this git revision.")
@click.option("--shard", metavar="K/N", help="Only the K-th of N deterministic shards of the file set.")
@click.option("--show-fixes", is_flag=True, help="List every edit made, with its rule code.")
@click.option("--no-color", is_flag=True, help="No colours, even on a terminal.")
@click.option("--quiet", "-q", is_flag=True, help="Print diagnostics and errors only, no summary.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True), help="Read settings from this pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--stdin-filename", default="<stdin>", help="The name to use for code read from `-`.")
def command(paths: tuple[str, ...], dry_run: bool, show_diff: bool, check: bool, select: tuple[str, ...],
            ignore: tuple[str, ...], enable: tuple[str, ...], exclude: tuple[str, ...],
            output_dir: str | None, fmt: str, jobs: int | None, no_cache: bool, cache_dir: str | None,
            changed_since: str | None, shard: str | None, show_fixes: bool, no_color: bool,
            quiet: bool, config_file: str | None, isolated: bool, stdin_filename: str) -> None:
    """Migrate PATHS (files or folders; `-` for standard input) from CUDA to Ascend NPUs.

    \b
    Exit codes: 0 nothing to do or done; 1 changes pending under --check/--diff/--dry-run,
    files that failed, or error-level diagnostics; 2 usage or fatal errors.
    """
    if not paths:
        raise click.UsageError("give at least one PATH (a file, a folder, or - for standard input)")
    if sum([dry_run, show_diff, check, output_dir is not None]) > 1:
        raise click.UsageError("--dry-run, --diff, --check and --output-dir exclude each other")
    try:
        settings = load_settings([p for p in paths if p != "-"], config_file, isolated)
        plan = _plan(settings, select, ignore, enable)
    except (ConfigError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    if paths == ("-",):
        sys.exit(_run_stdin(plan, stdin_filename, dry_run, show_diff, check, fmt, no_color))
    if "-" in paths:
        raise click.UsageError("`-` (standard input) cannot be mixed with other paths")
    mode = "dry-run" if dry_run else "diff" if show_diff else "check" if check else "write"
    try:
        files = _files(paths, settings, exclude, plan, changed_since, shard)
    except (FileNotFoundError, SelectionError) as exc:
        raise Fatal(str(exc)) from None
    if output_dir and (problem := output_dir_problem(paths, output_dir)):
        raise Fatal(problem)
    targets = _copy_tree(paths, output_dir, settings, exclude) if output_dir else None
    if mode == "write":
        clean_stale_temps(list(targets.values()) if targets else files)
    cache = None
    if not no_cache:
        directory = cache_dir or settings.cache_dir or os.path.join(
            settings.root if settings.source else ".", DEFAULT_DIR)
        cache = Cache(directory, run_key(plan.codes, plan.options, json.dumps(plan.per_file_ignores, sort_keys=True)))
    reporter = Reporter(mode, fmt, no_color, show_fixes, quiet, len(files))
    summary = RunSummary()
    start = time.perf_counter()
    results = run(files, plan, jobs or settings.jobs, cache)
    try:
        with stop_on_signals():  # SIGTERM and SIGHUP stop the run like Ctrl-C
            for result in reporter.track(results):
                if result.new_bytes is not None and mode == "write" and not result.outcome.error:
                    write_back(result, targets[result.path] if targets else None)
                summary.add(result, package_of(result.path, list(paths)))
                reporter.file(result)
    except KeyboardInterrupt as interrupt:
        results.close()  # stops the workers now, not when the interpreter exits
        reporter.close()
        click.echo("npu-migrate: interrupted; files written so far are complete, the rest untouched. "
                   "Run again to finish.", err=True)
        sys.exit(exit_status(interrupt))
    reporter.close()
    reporter.finish(summary, time.perf_counter() - start)
    pending = summary.changed and mode in ("diff", "check", "dry-run")
    sys.exit(EXIT_PENDING if pending or summary.failed or summary.errors else EXIT_OK)


def _plan(settings: Settings, select: Sequence[str], ignore: Sequence[str], enable: Sequence[str]) -> RunPlan:
    from codemods.framework.registry import all_rules, select_rules

    chosen = select_rules(all_rules(), _split(select) or settings.select,
                          _split(ignore) + settings.ignore, _split(enable) + settings.enable)
    return RunPlan([r.code for r in chosen], settings.rule_options(), settings.per_file_ignores,
                   settings.root)


def _files(paths: Sequence[str], settings: Settings, exclude: Sequence[str], plan: RunPlan,
           since: str | None, shard_spec: str | None) -> list[str]:
    suffixes = plan.ruleset_for("").suffixes()
    files = discover(paths, list(exclude) + settings.exclude, suffixes, settings.respect_gitignore,
                     root=settings.root)
    if since:
        changed = changed_since(since, paths)
        files = [f for f in files if os.path.abspath(f) in changed]
    if shard_spec:
        k, n = parse_shard(shard_spec)
        files = shard(files, k, n, settings.root if settings.source else ".")
    return files


def _copy_tree(paths: Sequence[str], output_dir: str, settings: Settings,
               exclude: Sequence[str]) -> dict[str, str]:
    """Copy the inputs into `output_dir` (folders whole, minus VCS/cache folders) and map each
    source file to its copy, so the migrated copy is complete and runnable."""
    os.makedirs(output_dir, exist_ok=True)
    targets: dict[str, str] = {}
    for path in paths:
        name = os.path.basename(os.path.normpath(os.path.abspath(path)))
        destination = output_dir if len(paths) == 1 and os.path.isdir(path) else os.path.join(output_dir, name)
        if os.path.isdir(path):
            shutil.copytree(path, destination, ignore=copy_ignore, symlinks=True, dirs_exist_ok=True)
            for root, _, files in os.walk(path):
                for file in files:
                    source = os.path.normpath(os.path.join(root, file))
                    targets[source] = os.path.join(destination, os.path.relpath(source, path))
        else:
            shutil.copy2(path, destination)
            targets[os.path.normpath(path)] = destination
    return targets


def _run_stdin(plan: RunPlan, name: str, dry_run: bool, show_diff: bool, check: bool, fmt: str,
               no_color: bool) -> int:
    data = sys.stdin.buffer.read()
    result = process_bytes(data, name, plan)
    outcome = result.outcome
    if fmt != "text":
        summary = RunSummary()
        summary.add(result, ".")
        _print_machine(fmt, [result], summary)
    elif dry_run or show_diff:
        if result.old_text is not None and outcome.new_text is not None:
            diff = unified_diff(result.old_text, outcome.new_text, name)
            colour = dry_run and not no_color and sys.stdout.isatty()
            sys.stdout.write(colourise(diff) if colour else diff)
    elif not check:
        sys.stdout.buffer.write(result.new_bytes if result.new_bytes is not None else data)
    for diagnostic in outcome.diagnostics:
        click.echo(diagnostic.format(), err=True)
    if outcome.error:
        click.echo(outcome.error, err=True)
        return EXIT_PENDING
    pending = outcome.changed and (dry_run or show_diff or check)
    return EXIT_PENDING if pending or outcome.has_errors else EXIT_OK


def _print_machine(fmt: str, results: list[FileResult], summary: RunSummary) -> None:
    if fmt == "json":
        payload = {"version": __version__, "files": [_file_json(r) for r in results],
                   "summary": summary.to_dict()}
        click.echo(json.dumps(payload, indent=2))
    else:
        from npu_migrate.apply.sarif_run import run_to_sarif

        click.echo(json.dumps(run_to_sarif(results), indent=2))


def _file_json(result: FileResult) -> dict[str, Any]:
    outcome = result.outcome
    return {"path": outcome.path, "changed": outcome.changed, "error": outcome.error,
            "edits": [e.to_dict() for e in outcome.edits],
            "diagnostics": [d.to_dict() for d in outcome.diagnostics]}


class Reporter:
    """Prints as results arrive (bounded memory); JSON and SARIF keep only the small per-file
    records, never the texts."""

    def __init__(self, mode: str, fmt: str, no_color: bool, show_fixes: bool, quiet: bool,
                 total: int) -> None:
        self.mode, self.fmt, self.show_fixes, self.quiet = mode, fmt, show_fixes, quiet
        self.tty = sys.stdout.isatty()
        self.colour = not no_color and self.tty and "NO_COLOR" not in os.environ
        self.records: list[FileResult] = []
        self.total = total
        self.progress: Any = None
        # diffs own stdout in diff modes; diagnostics then go to stderr so the diff stays a patch
        self.diag_err = mode in ("diff", "dry-run")

    def track(self, results: Any) -> Any:
        if self.total >= 200 and sys.stderr.isatty() and not self.quiet:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                                       TextColumn, TimeRemainingColumn)
            from rich.text import Text

            class RateColumn(ProgressColumn):
                def render(self, task: Any) -> Text:
                    return Text(f"{task.speed:.0f} files/s" if task.speed else "")

            self.progress = Progress(TextColumn("migrating"), BarColumn(), MofNCompleteColumn(),
                                     RateColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                     console=Console(stderr=True), transient=True)
            self.progress.start()
            task = self.progress.add_task("files", total=self.total)
            for result in results:
                self.progress.advance(task)
                yield result
            return
        yield from results

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _echo(self, text: str, err: bool = False) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True) if err \
                else click.echo(text)
        else:
            click.echo(text, err=err)

    def file(self, result: FileResult) -> None:
        outcome = result.outcome
        if self.fmt != "text":
            if outcome.changed or outcome.diagnostics or outcome.error or outcome.edits:
                self.records.append(FileResult(outcome))
            return
        if outcome.error:
            self._echo(outcome.error, err=True)
        if outcome.note:
            self._echo(outcome.note, err=True)
        if result.old_text is not None and outcome.new_text is not None and self.mode in ("diff", "dry-run"):
            diff = unified_diff(result.old_text, outcome.new_text, outcome.path)
            sys.stdout.write(colourise(diff) if self.mode == "dry-run" and self.colour else diff)
        elif outcome.changed and self.mode == "check":
            self._echo(f"would migrate {outcome.path}")
        for diagnostic in outcome.diagnostics:
            self._echo(diagnostic.format(), err=self.diag_err)
        if outcome.edits and (self.show_fixes or self.mode == "dry-run"):
            verb = "fixed" if self.mode == "write" else "would fix"
            for edit in outcome.edits:
                self._echo(f"{outcome.path}:{edit.line}:{edit.col}: {edit.code} {verb}: {edit.message}",
                           err=self.diag_err)

    def finish(self, summary: RunSummary, seconds: float) -> None:
        if self.fmt != "text":
            _print_machine(self.fmt, self.records, summary)
            return
        if self.quiet:
            return
        verb = {"write": "migrated", "check": "would change", "diff": "would change",
                "dry-run": "would change"}[self.mode]
        for line in summary.lines(verb):
            click.echo(line, err=True)
        click.echo(f"done in {seconds:.2f} s", err=True)

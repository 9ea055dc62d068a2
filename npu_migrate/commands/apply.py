"""`npu-migrate apply`: rewrite CUDA code for Ascend NPUs, or show / check what would change."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Generator, Sequence
from typing import Any

import click

from npu_migrate.apply.cache import DEFAULT_DIR, Cache, run_key
from npu_migrate.apply.engine import switched_off_option
from npu_migrate.apply.project import attach_project_facts, deepspeed_config_references
from npu_migrate.apply.runner import FileResult, RunPlan, clean_stale_temps, process_bytes, run, write_back
from npu_migrate.apply.selection import SelectionError, changed_since, parse_shard, resolve_rule_selectors, shard
from npu_migrate.apply.summary import RunSummary, package_of
from npu_migrate.commands.apply_report import MACHINE_FORMATS, Reporter, findings, render_report
from npu_migrate.commands.progress import TerminalProgress
from npu_migrate.core import formats
from npu_migrate.core.config import (
    TARGETS,
    ConfigError,
    Settings,
    SettingsFinder,
    did_you_mean,
    parse_table,
    show_settings,
)
from npu_migrate.core.diffs import colourise, unified_diff
from npu_migrate.core.discovery import (
    CUDA_SUFFIXES,
    JSON_SUFFIXES,
    MANIFEST_SUFFIXES,
    PYTHON_SUFFIXES,
    SHELL_SUFFIXES,
    copy_for_output,
    deepspeed_config_name,
    discover,
    excluded,
    manifest_name,
    output_dir_problem,
)
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX
from npu_migrate.core.parallel import exit_status, stop_on_signals

EXIT_OK, EXIT_PENDING, EXIT_FATAL = 0, 1, 2
ALL_SUFFIXES = (PYTHON_SUFFIXES + (NOTEBOOK_SUFFIX,) + SHELL_SUFFIXES + CUDA_SUFFIXES + JSON_SUFFIXES
                + MANIFEST_SUFFIXES)


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


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
    if legacy_format is not None:
        click.echo("npu-migrate: warning: --format is deprecated; use --output-format", err=True)
    fmt = output_format or legacy_format or "text"
    overrides = {key: value for key, value in (("target", target), ("target-version", target_version))
                 if value is not None}
    try:
        finder = SettingsFinder(config_file, isolated)
        if show_settings is not None:
            click.echo(show_settings_of(finder, show_settings))
            return
    except ConfigError as exc:
        raise Fatal(str(exc)) from None
    if not paths:
        raise click.UsageError("give at least one PATH (a file, a folder, or - for standard input)")
    if sum([fix, dry_run, show_diff, check, add_noqa, output_dir is not None]) > 1:
        raise click.UsageError("--fix, --dry-run, --diff, --check, --add-noqa and --output-dir exclude each other")
    if paths == ("-",):
        try:
            named = stdin_filename if stdin_filename != "<stdin>" else os.path.join(".", "-")
            plan = _plan_of({}, finder.for_path(named), select, ignore, enable, overrides)
        except (ConfigError, ValueError) as exc:
            raise Fatal(str(exc)) from None
        sys.exit(_run_stdin(plan, stdin_filename, dry_run, show_diff, check, fmt, no_color, exit_zero))
    if "-" in paths:
        raise click.UsageError("`-` (standard input) cannot be mixed with other paths")
    existing = [p for p in paths if os.path.lexists(p)]
    for missing in (p for p in paths if p not in existing):
        click.echo(f"npu-migrate: error: {missing}: no such file or directory", err=True)
    mode = ("dry-run" if dry_run else "diff" if show_diff else "check" if check
            else "add-noqa" if add_noqa else "write")
    plans: dict[int, RunPlan] = {}
    try:
        with TerminalProgress(enabled=not quiet and not show_files).preparing("finding files, reading the project"):
            files = _files(existing, finder, exclude, lambda s: _plan_of(plans, s, select, ignore, enable, overrides),
                           changed_since, shard)
    except (ConfigError, ValueError, SelectionError) as exc:
        raise Fatal(str(exc)) from None
    if show_files:
        for file, _ in files:
            click.echo(file)
        sys.exit(EXIT_FATAL if len(existing) < len(paths) else EXIT_OK)
    if output_dir and (problem := output_dir_problem(existing, output_dir)):
        raise Fatal(problem)
    targets = copy_for_output(existing, output_dir) if output_dir else None
    if mode == "write":
        clean_stale_temps(list(targets.values()) if targets else [file for file, _ in files])
    groups = _groups(files, plans)
    try:
        output = open(output_file, "w", encoding="utf-8") if output_file else sys.stdout  # noqa: SIM115
    except OSError as exc:
        raise Fatal(f"--output-file {output_file}: {exc.strerror}") from None
    reporter = Reporter(mode, fmt, no_color, show_fixes, quiet, len(files), output, statistics)
    summary = RunSummary()
    results = _results(groups, cache_dir, no_cache, jobs)  # closing it stops the current group's workers
    try:
        try:
            with stop_on_signals():  # SIGTERM and SIGHUP stop the run like Ctrl-C
                for result in reporter.track(results):
                    if result.new_bytes is not None and mode == "write" and not result.outcome.error:
                        write_back(result, targets[result.path] if targets else None)
                    summary.add(result, package_of(result.path, existing))
                    reporter.file(result)
        except KeyboardInterrupt as interrupt:
            results.close()
            reporter.close()
            click.echo("npu-migrate: interrupted; files written so far are complete, the rest untouched. "
                       "Run again to finish.", err=True)
            sys.exit(exit_status(interrupt))
        finally:
            reporter.close()
        if mode == "add-noqa":
            reporter.add_noqa()
        reporter.finish(summary, time.perf_counter() - start)
    finally:
        if output is not sys.stdout:
            output.close()
    if len(existing) < len(paths):
        sys.exit(EXIT_FATAL)
    reasons = _exit_reasons(summary, mode)
    if reasons and not quiet and fmt not in MACHINE_FORMATS:
        click.echo(f"exit {EXIT_OK if exit_zero else EXIT_PENDING}: {'; '.join(reasons)}"
                   + (" (--exit-zero)" if exit_zero else ""), err=True)
    sys.exit(EXIT_PENDING if reasons and not exit_zero else EXIT_OK)


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


def _plan(settings: Settings, select: Sequence[str], ignore: Sequence[str], enable: Sequence[str]) -> RunPlan:
    from codemods.api.registry import RuleError, all_rules, select_rules

    rules = all_rules()
    ignored = _split(ignore) + settings.ignore
    try:
        chosen = select_rules(rules, _split(select) or settings.select, ignored, _split(enable) + settings.enable)
    except RuleError as exc:
        unknown = str(exc).split("'")[1] if str(exc).count("'") >= 2 else ""
        close = did_you_mean(unknown, [r.code for r in rules] + [r.name for r in rules]) if unknown else None
        raise RuleError(f"{exc}; did you mean {close!r}?" if close else str(exc)) from None
    return RunPlan([r.code for r in chosen], settings.rule_options() | switched_off_option(ignored),
                   settings.per_file_ignores, settings.root)


def _plan_of(plans: dict[int, RunPlan], settings: Settings, select: Sequence[str],
             ignore: Sequence[str], enable: Sequence[str],
             overrides: dict[str, str] | None = None) -> RunPlan:
    """One plan per distinct settings (the finder returns one object per configuration file);
    the configuration's rule selectors are checked against the installed rules here, once.
    `overrides` are command-line values of configuration keys (`--target`), checked as the
    configuration's own values are."""
    if id(settings) not in plans:
        chosen = settings
        if overrides:
            given = parse_table(overrides, "command line")
            chosen = dataclasses.replace(settings, **{key.replace("-", "_"): getattr(given, key.replace("-", "_"))
                                                      for key in overrides})
        plan = _plan(resolve_rule_selectors(chosen), select, ignore, enable)
        plan.settings = settings  # type: ignore[attr-defined]
        plans[id(settings)] = plan
    return plans[id(settings)]


def _deepspeed_configs(found: dict[str, None], explicit: set[str], finder: SettingsFinder) -> set[str]:
    """The discovered .json files to check as DeepSpeed configurations: named on the command
    line, named like one, matching the configuration's `deepspeed-configs` globs, or passed to
    DeepSpeed by the project's code."""
    json_files = [f for f in found if f.endswith(JSON_SUFFIXES)]
    if not json_files:
        return set()
    chosen = {f for f in json_files if f in explicit or deepspeed_config_name(f)}
    for file in json_files:
        settings = finder.for_path(file)
        if settings.deepspeed_configs and excluded(os.path.relpath(os.path.abspath(file), settings.root),
                                                   settings.deepspeed_configs):
            chosen.add(file)
    if len(chosen) < len(json_files):
        root = finder.for_path(json_files[0]).root
        referenced = deepspeed_config_references(list(found), root)
        chosen |= {f for f in json_files if os.path.abspath(f) in referenced}
    return chosen


def _files(paths: Sequence[str], finder: SettingsFinder, exclude: Sequence[str], plan_for: Any,
           since: str | None, shard_spec: str | None) -> list[tuple[str, Settings]]:
    """Each file with its own settings. Which files a folder yields depends only on the
    command line and on each file's own configuration, never on the other paths given."""
    found: dict[str, None] = {}
    for path in paths:
        governing = finder.for_path(path)
        for file in discover([path], list(exclude), ALL_SUFFIXES, governing.respect_gitignore,
                             root=governing.root if governing.source else None):
            found[file] = None
    explicit = {os.path.normpath(p) for p in paths if os.path.isfile(p)}
    chosen: list[tuple[str, Settings]] = []
    deepspeed = _deepspeed_configs(found, explicit, finder)
    for file in sorted(found):
        if file.endswith(JSON_SUFFIXES) and file not in deepspeed:
            continue  # only DeepSpeed configurations among JSON files (NPU540)
        if file.endswith(".txt") and file not in explicit and not manifest_name(file):
            continue  # only requirements files among .txt (NPU315); other YAML files are configs (NPU541)
        settings = finder.for_path(file)
        if settings.exclude and not discover([file], settings.exclude, root=settings.root):
            continue  # excluded by its own configuration
        suffixes = plan_for(settings).ruleset_for("").suffixes()
        if file not in explicit and not file.endswith(suffixes):
            continue  # no selected rule reads this kind of file
        chosen.append((file, settings))
    # project facts (issue 14) come from the whole project, before the set is narrowed
    attach_project_facts(_project_groups(chosen, exclude, plan_for))
    if since:
        changed = changed_since(since, paths)
        chosen = [(f, s) for f, s in chosen if os.path.abspath(f) in changed]
    if shard_spec:
        k, n = parse_shard(shard_spec)
        chosen = [(f, s) for f, s in chosen
                  if shard([f], k, n, s.root if s.source else ".")]
    return chosen


def _project_groups(chosen: list[tuple[str, Settings]], exclude: Sequence[str],
                    plan_for: Any) -> list[tuple[RunPlan, Any, str]]:
    """What each plan's project facts are computed over. A configured project (a pyproject.toml or
    npu-migrate.toml) is its whole folder, so a file's result does not depend on which of its
    project's files a run was given (pre-commit passes only the staged ones); files under no
    configuration bring only the files of this run."""
    groups: dict[int, tuple[RunPlan, Any, str]] = {}
    for _, settings in chosen:
        if id(settings) in groups:
            continue
        if settings.source:
            def files(settings: Settings = settings) -> list[str]:
                return discover([settings.root], [*exclude, *settings.exclude], PYTHON_SUFFIXES,
                                settings.respect_gitignore, root=settings.root)
            root = settings.root
        else:
            def files(settings: Settings = settings) -> list[str]:
                return [f for f, s in chosen if not s.source]
            root = _unconfigured_root([f for f, s in chosen if not s.source])
        groups[id(settings)] = (plan_for(settings), files, root)
    return list(groups.values())


def _unconfigured_root(files: list[str]) -> str:
    """What files under no configuration are a project of: the working folder when they lie in
    it, else the folder holding them all, above any package (`apply /elsewhere/project` from
    another folder), so their module names (`pkg.kernels`) and so the project facts do not
    depend on where the run was started."""
    here = os.path.abspath(".")
    paths = [os.path.abspath(f) for f in files]
    if all(p == here or p.startswith(here + os.sep) for p in paths):
        return "."
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    while os.path.isfile(os.path.join(root, "__init__.py")) and os.path.dirname(root) != root:
        root = os.path.dirname(root)  # a package's files are named from the folder above it
    return root


def _groups(files: list[tuple[str, Settings]], plans: dict[int, RunPlan]) -> list[tuple[RunPlan, list[str]]]:
    """Files sharing settings run together, groups in the order of their first file."""
    grouped: dict[int, list[str]] = {}
    for file, settings in files:
        grouped.setdefault(id(settings), []).append(file)
    return [(plans[key], members) for key, members in grouped.items()]


def _results(groups: list[tuple[RunPlan, list[str]]], cache_dir: str | None, no_cache: bool,
             jobs: int | None) -> Generator[FileResult, None, None]:
    """Each group through the runner with its own plan, one group after the other."""
    for plan, members in groups:
        settings: Settings = plan.settings  # type: ignore[attr-defined]
        cache = None
        if not no_cache:
            directory = cache_dir or settings.cache_dir or os.path.join(
                settings.root if settings.source else ".", DEFAULT_DIR)
            cache = Cache(directory, run_key(plan.codes, plan.options,
                                             json.dumps(plan.per_file_ignores, sort_keys=True)))
        yield from run(members, plan, jobs or settings.jobs, cache)


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

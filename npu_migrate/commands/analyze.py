"""`npu-migrate analyze`: a migration assessment (architecture, computation, memory) of a CUDA
code base, with exact file:line locations, as rich tables or markdown / JSON / SARIF / HTML."""

from __future__ import annotations

import sys

import click

EXIT_OK, EXIT_FAILED, EXIT_FATAL = 0, 1, 2


class Fatal(click.ClickException):
    exit_code = EXIT_FATAL

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"npu-migrate: error: {self.format_message()}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--only", multiple=True, type=click.Choice(["architecture", "computation", "memory"]),
              help="Run only these analyses (repeatable; default: all three).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json", "sarif", "html"]),
              default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True),
              help="Write the report to this file instead of standard output.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--exclude", multiple=True, help="Glob of files or folders to leave out (repeatable).")
@click.option("--max-rows", type=click.IntRange(min=0), default=30, show_default=True,
              help="Rows per table on the terminal (0 = all); other formats are never clipped.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True),
              help="Read rule selection from this pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--target", type=click.Choice(["npu", "portable"]),
              help="Judge what `apply --target` would rewrite and what it would report [config: target].")
@click.option("--target-version", metavar="X.Y", help="The oldest torch the migrated code must run on [config: target-version].")
@click.option("--torch-npu-version", metavar="X.Y",
              help="Judge NPU kernel support for this torch_npu version (default: any version in the list).")
def command(paths: tuple[str, ...], only: tuple[str, ...], fmt: str, output: str | None, jobs: int | None,
            exclude: tuple[str, ...], max_rows: int, config_file: str | None, isolated: bool,
            torch_npu_version: str | None, target: str | None = None,
            target_version: str | None = None) -> None:
    """Assess PATHS (files or folders) for a port to Ascend NPUs.

    \b
    Exit codes: 0 report written; 1 some files could not be analysed (named on stderr);
    2 usage or fatal errors.
    """
    from npu_migrate.analyze import SECTIONS, analyze, default_plan
    from npu_migrate.analyze.render import render
    from npu_migrate.apply.selection import resolve_rule_selectors
    from npu_migrate.commands.progress import TerminalProgress
    from npu_migrate.core.config import ConfigError, load_settings, parse_table
    from npu_migrate.core.parallel import collect_less_often

    collect_less_often()
    if not paths:
        raise click.UsageError("give at least one PATH (a file or a folder)")
    try:
        settings = resolve_rule_selectors(load_settings(list(paths), config_file, isolated))
        given = {key: value for key, value in (("target", target), ("target-version", target_version)) if value}
        if given:  # checked as the configuration's own values are
            chosen = parse_table(given, "command line")
            settings.target, settings.target_version = (
                chosen.target if target else settings.target,
                chosen.target_version if target_version else settings.target_version)
        plan = default_plan(settings.select, settings.ignore, settings.enable, settings.rule_options(),
                            settings.per_file_ignores, settings.root)
    except (ConfigError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    bar = TerminalProgress()

    def progress(done: int, total: int) -> None:
        if done == 0:
            bar.start("analysing", total)
        else:
            bar.advance()

    bar.prepare("finding files")  # until the files are known and the bar starts
    try:
        assessment = analyze(paths, only or SECTIONS, jobs or settings.jobs, list(exclude) + settings.exclude,
                             plan, settings.respect_gitignore, progress=progress, torch_npu_version=torch_npu_version)
    except (FileNotFoundError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    finally:
        bar.stop()
    if fmt == "text" and output is None:
        from rich.console import Console

        render(assessment, fmt, max_rows, Console(highlight=False))
    else:
        text = render(assessment, fmt, 0 if output else max_rows)
        if output:
            try:
                with open(output, "w", encoding="utf-8") as handle:
                    handle.write(text)
            except OSError as exc:
                raise Fatal(f"{output}: cannot write: {exc.strerror}") from None
        else:
            sys.stdout.write(text)
    for error in assessment.errors:
        click.echo(error, err=True)
    sys.exit(EXIT_FAILED if assessment.errors else EXIT_OK)

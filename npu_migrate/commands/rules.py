"""`npu-migrate rules [CODE]`: list every rule, or print one rule's doc page."""

from __future__ import annotations

import json
import os

import click


def doc_page(code: str) -> str | None:
    """The rule's doc page: from the source tree when run from a checkout, else packaged."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for candidate in (os.path.join(here, "docs", "rules", f"{code}.md"),):
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                return handle.read()
    return None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(code: str | None, fmt: str) -> None:
    """List every rule (code, name, default, fix safety, summary), or show the doc page of CODE."""
    from npu_migrate_codemods.registry import RuleError, all_rules, find_rule

    if code:
        try:
            rule = find_rule(code)
        except RuleError as exc:
            raise click.ClickException(str(exc)) from None
        if fmt == "json":
            click.echo(json.dumps(rule.describe(), indent=2))
            return
        page = doc_page(rule.code)
        click.echo(page if page else f"# {rule.code}: {rule.name}\n\n{rule.summary}\n")
        return
    rules = all_rules()
    if fmt == "json":
        click.echo(json.dumps([r.describe() for r in rules], indent=2))
        return
    width = max((len(r.name) for r in rules), default=4)
    click.echo(f"{'CODE':<7} {'NAME':<{width}}  {'DEFAULT':<7}  {'FIX':<6}  SUMMARY")
    for rule in rules:
        default = "on" if rule.default else "opt-in"
        click.echo(f"{rule.code:<7} {rule.name:<{width}}  {default:<7}  {rule.fix.value:<6}  {rule.summary}")

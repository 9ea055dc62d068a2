"""`npu-migrate rules [CODE]`: list every rule, or print one code's page.

Pages come from the installed code, never from a docs/ folder, so an installed wheel prints
the same page as a checkout:
- a rule's page is rendered from the rule itself (docstring sections, fix safety, default, data
  rows, cases) by `codemods.docgen.pages`, the renderer that also writes docs/rules/CODE.md;
- a plugin rule whose docstring lacks the sections may ship `docs/CODE.md` beside its module;
- a diagnostic code that is not a rule (NPU000, ANA*, MEM*, VER*) prints its wing's page, from its
  family's table (`codes.toml`, declared in the wing's `data_tables.py`).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

EXIT_FATAL = 2


def _plugin_page(rule: Any) -> str | None:
    module_file = getattr(sys.modules.get(rule.__module__), "__file__", None)
    if not module_file:
        return None
    try:
        with open(os.path.join(os.path.dirname(module_file), "docs", f"{rule.code}.md"), encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def doc_page(rule: Any, origin: str | None = None) -> str:
    """The page of a rule (see the module docstring)."""
    from codemods.api.cases import doc_of, sections
    from codemods.docgen.pages import render_rule_page

    if origin and not sections(doc_of(rule)):
        page = _plugin_page(rule)
        if page is not None:
            return page
    return render_rule_page(rule, origin)


def code_page(code: str) -> str | None:
    """The page of a diagnostic code that is not a rule, from its family's table."""
    from npu_migrate.commands.docgen import wing_pages

    return wing_pages(code.upper()).get(code.upper())


def targets(rule: Any) -> dict[str, str]:
    from codemods.api.cases import targets_of

    return targets_of(rule)


def _target_names(rule: Any) -> str:
    names = [t for t, what in targets(rule).items() if not what.startswith("not yet")]
    return ",".join(names) or "-"


def _describe(rule: Any, origin: str | None) -> dict[str, Any]:
    data = rule.describe()
    data["language"] = rule.language
    data["plugin"] = origin
    data["targets"] = targets(rule)
    return data


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(code: str | None, fmt: str) -> None:
    """List every rule (code, name, default on/off, fix safety, targets, summary), or show CODE's
    page (a rule's code or name, or a diagnostic code such as ANA001)."""
    from codemods.api.registry import RuleError, all_rules, find_rule, plugin_origin
    from npu_migrate.core.tables import DataError

    try:
        rules = all_rules()
        rule = find_rule(code) if code else None
    except DataError as exc:  # a broken data table: one line naming the file and field
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_FATAL)
    except RuleError as exc:
        try:
            page = code_page(code) if code else None
        except DataError as broken:  # a broken code table: one line naming the file and entry
            click.echo(f"npu-migrate: error: {broken}", err=True)
            sys.exit(EXIT_FATAL)
        if page is None:
            click.echo(f"npu-migrate: error: {exc}", err=True)
            sys.exit(EXIT_FATAL)
        assert code is not None
        click.echo(json.dumps({"code": code.upper(), "doc": page}, indent=2) if fmt == "json" else page,
                   nl=fmt == "json")
        return
    if rule is not None:
        origin = plugin_origin(rule)
        page = doc_page(rule, origin)
        if fmt == "json":
            click.echo(json.dumps(_describe(rule, origin) | {"doc": page}, indent=2))
            return
        click.echo(page, nl=False)
        return
    if fmt == "json":
        click.echo(json.dumps([_describe(r, plugin_origin(r)) for r in rules], indent=2))
        return
    width = max((len(r.name) for r in rules), default=4)
    click.echo(f"{'CODE':<7} {'NAME':<{width}}  {'DEFAULT':<7}  {'FIX':<6}  {'TARGETS':<12}  SUMMARY")
    for rule in rules:
        default = "on" if rule.default else "off"
        origin = plugin_origin(rule)
        suffix = f"  [plugin: {origin}]" if origin else ""
        click.echo(f"{rule.code:<7} {rule.name:<{width}}  {default:<7}  {rule.fix.value:<6}  "
                   f"{_target_names(rule):<12}  {rule.summary}{suffix}")

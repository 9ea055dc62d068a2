"""`npu-migrate rules [CODE]`: list every rule, or print one rule's doc page.

Where a doc page comes from, first found wins:
1. `docs/rules/CODE.md` of the source checkout the package runs from (editable installs);
2. the `npu_migrate_docs` package (`rules/CODE.md`), when a wheel ships the docs as package data;
3. for plugin rules, `docs/CODE.md` beside the module that defines the rule;
4. a page built from the rule itself: its summary, fix safety, default and docstring.
So `rules CODE` always prints something useful, from a checkout or from an installed wheel.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from typing import Any

import click

EXIT_FATAL = 2


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _checkout_page(code: str) -> str | None:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return _read(os.path.join(here, "docs", "rules", f"{code}.md"))


def _packaged_page(code: str) -> str | None:
    try:
        from importlib.resources import files

        resource = files("npu_migrate_docs") / "rules" / f"{code}.md"
        return resource.read_text(encoding="utf-8") if resource.is_file() else None
    except (ImportError, OSError, TypeError):
        return None


def _plugin_page(rule: Any) -> str | None:
    module = sys.modules.get(rule.__module__)
    module_file = getattr(module, "__file__", None)
    if not module_file:
        return None
    return _read(os.path.join(os.path.dirname(module_file), "docs", f"{rule.code}.md"))


def generated_page(rule: Any, origin: str | None) -> str:
    lines = [f"# {rule.code}: {rule.name}", "", rule.summary, ""]
    doc = inspect.getdoc(rule)
    if doc and rule.__doc__:  # only the rule's own docstring, not the base class's
        lines += [doc, ""]
    lines += ["## Fix safety", "", _fix_sentence(rule.fix.value), "",
              f"Default: {'on' if rule.default else 'off (opt-in: `--enable ' + rule.name + '`)'}."]
    if origin:
        lines += ["", f"Provided by the plugin {origin}."]
    return "\n".join(lines) + "\n"


def _fix_sentence(fix: str) -> str:
    return {"safe": "Safe: the rewrite keeps the program's meaning.",
            "unsafe": "Unsafe: the rewrite may change behaviour; review it.",
            "none": "No fix: a diagnostic only."}.get(fix, fix)


def doc_page(code: str, rule: Any = None) -> str | None:
    """The rule's doc page text (see the module docstring for the search order)."""
    page = _checkout_page(code) or _packaged_page(code)
    if page is None and rule is not None:
        page = _plugin_page(rule)
    return page


def _describe(rule: Any, origin: str | None) -> dict[str, Any]:
    data = rule.describe()
    data["language"] = rule.language
    data["plugin"] = origin
    return data


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(code: str | None, fmt: str) -> None:
    """List every rule (code, name, default on/off, fix safety, summary), or show CODE's doc page."""
    from codemods.framework.registry import RuleError, all_rules, find_rule, plugin_origin

    try:
        rules = all_rules()
        rule = find_rule(code) if code else None
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_FATAL)
    if rule is not None:
        origin = plugin_origin(rule)
        if fmt == "json":
            click.echo(json.dumps(_describe(rule, origin) | {"doc": doc_page(rule.code, rule)}, indent=2))
            return
        click.echo(doc_page(rule.code, rule) or generated_page(rule, origin), nl=False)
        return
    if fmt == "json":
        click.echo(json.dumps([_describe(r, plugin_origin(r)) for r in rules], indent=2))
        return
    width = max((len(r.name) for r in rules), default=4)
    click.echo(f"{'CODE':<7} {'NAME':<{width}}  {'DEFAULT':<7}  {'FIX':<6}  SUMMARY")
    for rule in rules:
        default = "on" if rule.default else "off"
        origin = plugin_origin(rule)
        suffix = f"  [plugin: {origin}]" if origin else ""
        click.echo(f"{rule.code:<7} {rule.name:<{width}}  {default:<7}  {rule.fix.value:<6}  "
                   f"{rule.summary}{suffix}")

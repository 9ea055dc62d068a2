"""The diagnostic codes a wing prints that are not rules (ANA, MEM, VER, the engine's NPU0xx): one
table per family, `codes.toml` in the wing's data folder, declared in the wing's `data_tables.py`
with `code_table(prefix, ...)` and read through the one loader (`tables.TableSet`), so
`python -m npu_migrate.commands.tables --check` refuses a bad entry with one line naming the file
and the entry.

A table is TOML because its values are pages: a literal multi-line string (`'''`) holds markdown
exactly as it reads, with no escapes, and the entry's fields stand beside it. Each entry (`[[codes]]`):

- `code`: the family's prefix and its digits (ANA001; the engine's NPU0 and two), unique in the table;
- `title`: the page's title (for ANA, the finding's name);
- `severity` and `summary` where the family has them (ANA: its default severity and one line);
- the page after its title line: `page`, or `template` and `fields` for codes whose pages share
  their shape (`[templates]` holds the shared text; each `${name}` is one of the entry's `fields`,
  or its own `code`, `title` or `severity`, so a page never restates a field in other words).

The page of `code` is `# CODE title`, a blank line, then the page text.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Any

from npu_migrate.core.tables import Checked, ListOf, MapOf, OneOf, Pattern, Record, TableSet

CODE_TABLE = "codes.toml"
SEVERITIES = OneOf("error", "warning", "info")
OWN_FIELDS = frozenset({"code", "title", "severity"})  # what a template may name of the entry itself


@dataclass(frozen=True)
class CodeSchema(Checked):
    """The schema of a family's table, with the family's prefix (so one code's page reads one table)."""

    prefix: str = ""


def code_table(prefix: str, digits: int = 3, *, severity: bool = False, summary: bool = False) -> CodeSchema:
    """The schema of a family's table: codes of `prefix` and `digits` digits, with the fields the
    family has."""
    code = Pattern(rf"{prefix}\d{{{digits}}}", f"a {prefix} code ({prefix} and {digits} digits)")
    required: dict[str, Any] = {"code": code, "title": str}
    if severity:
        required["severity"] = SEVERITIES
    if summary:
        required["summary"] = str
    entry = Record(required=required, optional={"page": str, "template": str, "fields": MapOf(str)})
    return CodeSchema(Record(required={"codes": ListOf(entry, key="code")},
                             optional={"about": str, "templates": MapOf(str)}),
                      _page_problems, prefix)


def _page_problems(table: dict[str, Any]) -> list[str]:
    """Each entry has its page: its own text, or a known template with exactly its fields."""
    templates = table.get("templates", {})
    found = []
    for entry in table["codes"]:
        where = f"codes[{entry['code']}]"
        if ("page" in entry) == ("template" in entry):
            found.append(f"{where}: needs either 'page' or 'template' (with 'fields')")
        elif "template" in entry:
            found += _template_problems(entry, templates, where)
        elif "fields" in entry:
            found.append(f"{where}.fields: only with a 'template'")
    return found


def _template_problems(entry: dict[str, Any], templates: dict[str, str], where: str) -> list[str]:
    name = entry["template"]
    if name not in templates:
        return [f"{where}.template: no template {name!r} (known: {', '.join(sorted(templates))})"]
    wanted = set(Template(templates[name]).get_identifiers())
    fields = set(entry.get("fields", {}))
    own = wanted & (set(entry) & OWN_FIELDS)
    if wanted - own != fields:
        return [f"{where}.fields: template {name!r} takes {', '.join(sorted(wanted - own))}; "
                f"given {', '.join(sorted(fields)) or 'none'}"]
    return []


def family_prefix(tables: TableSet) -> str | None:
    """The code prefix of the family `tables` holds a table of, None when it holds none."""
    schema = tables.schemas.get(CODE_TABLE)
    return schema.prefix if isinstance(schema, CodeSchema) else None


def entries(tables: TableSet) -> dict[str, dict[str, Any]]:
    """code -> its entry, from the family table of `tables` (read and checked once)."""
    return {entry["code"]: entry for entry in tables.load(CODE_TABLE)["codes"]}


def pages(tables: TableSet) -> dict[str, str]:
    """code -> its page (markdown, ending in one newline), from the family table of `tables`."""
    table = tables.load(CODE_TABLE)
    return {entry["code"]: _page(entry, table.get("templates", {})) for entry in table["codes"]}


def _page(entry: dict[str, Any], templates: dict[str, str]) -> str:
    if "page" in entry:
        body = entry["page"]
    else:
        values = {key: entry[key] for key in OWN_FIELDS & set(entry)}
        values |= {key: text.strip("\n") for key, text in entry["fields"].items()}
        body = Template(templates[entry["template"]]).substitute(values)
    body = body.strip("\n")
    return f"# {entry['code']} {entry['title']}\n\n{body}\n"

"""A rule's documentation page, rendered from the rule itself: its docstring sections, fix
safety, default, and the cases its tests run. `npu-migrate rules CODE` prints it from the
installed code; `python -m npu_migrate.commands.docgen` writes it to docs/rules/CODE.md.
"""

from __future__ import annotations

from typing import Any

from codemods.api.cases import Invalid, Valid, cases_of, doc_of, sections
from codemods.docgen import coverage

_FENCE = {".py": "python", ".sh": "bash", ".bash": "bash", ".cu": "cuda", ".cuh": "cuda", ".json": "json",
          ".yaml": "yaml", ".yml": "yaml"}
FIX_WORDS = {"safe": "Safe: the rewrite keeps the program's meaning.",
             "unsafe": "Unsafe: the rewrite may change behaviour; review it.",
             "none": "No fix: a diagnostic only."}


def _fence(text: str, path: str) -> list[str]:
    language = next((lang for suffix, lang in _FENCE.items() if path.endswith(suffix)), "text")
    return [f"```{language}", text.rstrip("\n"), "```"]


def _default(rule: Any) -> str:
    return "on" if rule.default else f"off (opt-in: `--enable {rule.name}`)"


def _cases(rule: Any) -> list[str]:
    found = cases_of(rule)
    if not found:
        return []
    lines = ["## Cases", "", "What `tests/rules/test_rule_cases.py` checks, rule by rule (only this rule "
             "runs, so other rules' rewrites do not show)."]
    for case in found:
        lines.append("")
        settings = dict(case.options)
        if settings:  # `--target portable`, `target-version = "2.5"`
            lines += ["With " + ", ".join(f"`{key.replace('_', '-')} = {value!r}`"
                                          for key, value in settings.items()) + ":", ""]
        if isinstance(case, Invalid):
            codes = ", ".join(case.codes or (rule.code,))
            if case.lines:
                codes += (" at line " if len(case.lines) == 1 else " at lines ") + ", ".join(map(str, case.lines))
            if case.after is None:
                lines += [f"Reported ({codes}), left as it is:", "", *_fence(case.source, case.path)]
            else:
                lines += [f"Rewritten ({codes}):", "", *_fence(case.source, case.path), "",
                          "becomes", "", *_fence(case.after, case.path)]
        elif isinstance(case, Valid):
            lines += ["Left alone:", "", *_fence(case.source, case.path)]
    return lines


def _data(rule: Any) -> list[str]:
    """The data entries that name this rule, per table: a new entry shows on the page."""
    lines: list[str] = []
    for path, table in coverage.data_files():
        rows = [coverage.row(e) for e in table["entries"]
                if rule.code in (e.get("code"), e.get("shell_code"), e.get("config_code"))]
        if rows:
            lines += ["", f"From `codemods/data/{path.name}` (a new row there extends the rule):", "",
                      *coverage.HEADER, *rows]
    return ["## Data", *lines] if lines else []


def render_rule_page(rule: Any, origin: str | None = None) -> str:
    """The markdown page of a rule (built-in or plugin)."""
    doc = doc_of(rule)
    found = sections(doc)
    lines = [f"# {rule.code}: {rule.name}", ""]
    if not found:  # a plugin rule without the sections: its summary and docstring as they are
        lines += [rule.summary, ""] + ([doc, ""] if doc else [])
        lines += ["## Fix safety", "", FIX_WORDS.get(rule.fix.value, rule.fix.value)]
    for title, text in found.items():
        lines += [f"## {title}", "", text, ""]
        if title == "Fix safety":
            lines += [f"Fix: `{rule.fix.value}`. Default: {_default(rule)}.", ""]
    if not found:
        lines += ["", f"Default: {_default(rule)}."]
    if origin:
        lines += ["", f"Provided by the plugin {origin}."]
    for part in (_data(rule), _cases(rule)):
        if part:
            lines += (["", *part] if lines[-1] != "" else part) + [""]
    return "\n".join(lines).rstrip("\n") + "\n"

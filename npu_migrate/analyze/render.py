"""Writers for the assessment: rich tables on a terminal, markdown, JSON, SARIF 2.1.0 and a
self-contained HTML page. Every format carries the same tables and located findings."""

from __future__ import annotations

import html
import json
from typing import Any

from npu_migrate import __version__
from npu_migrate.analyze.aggregate import Assessment
from npu_migrate.analyze.classify import STATUS_CODES, STATUS_LABELS
from npu_migrate.analyze.findings import sarif_rules
from npu_migrate.core.diagnostics import Diagnostic, Report, Table

FORMATS = ("text", "markdown", "json", "sarif", "html")
HEADINGS = {"architecture": "Architecture", "computation": "Computation", "memory": "Memory"}


def render(assessment: Assessment, fmt: str, max_rows: int = 0, console: Any = None) -> str:
    if fmt == "json":
        return json.dumps(to_json(assessment), indent=2, default=str) + "\n"
    if fmt == "sarif":
        from npu_migrate.core.sarif import to_sarif

        log = to_sarif(assessment.findings, sarif_rules(), __version__)
        for result, diagnostic in zip(log["runs"][0]["results"], assessment.findings):
            result["properties"] = {"evidence": list(evidence_of(diagnostic)),
                                    "confidence": confidence_of(diagnostic)}
        return json.dumps(log, indent=2) + "\n"
    if fmt == "markdown":
        return to_markdown(assessment)
    if fmt == "html":
        return to_html(assessment)
    return to_terminal(assessment, max_rows, console)


def evidence_of(diagnostic: Diagnostic) -> tuple[str, ...]:
    return getattr(diagnostic, "evidence", ())


def confidence_of(diagnostic: Diagnostic) -> str:
    return getattr(diagnostic, "confidence", "high")


def to_json(assessment: Assessment) -> dict[str, Any]:
    return {
        "title": assessment.title,
        "tool": {"name": "npu-migrate", "version": __version__},
        "summary": assessment.summary,
        "rating": assessment.rating.to_dict() if assessment.rating else None,
        "sections": {name: [t.to_dict() for t in tables] for name, tables in assessment.sections.items()},
        "findings": [d.to_dict() for d in assessment.findings],
        "errors": assessment.errors,
        "engine_errors": assessment.engine_errors,
    }


def to_markdown(assessment: Assessment) -> str:
    parts = [f"# {assessment.title}", ""]
    parts += [f"- **{key}**: {value}" for key, value in assessment.summary.items()] + [""]
    for name, tables in assessment.sections.items():
        parts += [f"## {HEADINGS[name]}", ""]
        for table in tables:
            parts.append(table.to_markdown() if table.rows else f"### {table.title}\n\nNone found.\n")
    if assessment.findings:
        parts += ["## Findings", ""]
        for d in assessment.findings:
            parts.append(f"- `{d.format(with_doc=False)}` ([{d.code}]({d.doc})), confidence {confidence_of(d)}")
            parts += [f"  - seen: {item}" for item in evidence_of(d)]
        parts.append("")
    if assessment.errors:
        parts += ["## Files that could not be analysed", ""] + [f"- `{e}`" for e in assessment.errors] + [""]
    if assessment.engine_errors:
        parts += ["## Files `apply` cannot rewrite", ""] + [f"- `{e}`" for e in assessment.engine_errors] + [""]
    return "\n".join(parts)


# the HTML page shows what needs a person first: CUDA locations by status, findings by severity
ATTENTION = ("manual", "reported", "policy", "rewritten")
ROUTINE = frozenset({"rewritten"})
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:0.25em 0.5em;"
    "text-align:left;vertical-align:top}th{background:#f2f2f2}code{font-size:90%;background:#f4f4f4;padding:0 0.2em}"
    ".warning{color:#9a5b00}.error{color:#b00020}.info{color:#555}"
    "tr.status-manual{background:#fde7e9}tr.status-reported{background:#fff4e0}"
    "tr.status-policy{background:#eef2fb}tr.status-rewritten{color:#555}"
    "input[name=show]+label{margin-right:1.5em}.report{border-top:1px solid #ccc;margin-top:0.5em}"
    # the filter is plain CSS (the page runs no script): a checked radio hides the routine rows
    "#show-work:checked~.report tr.routine,#show-work:checked~.report li.routine{display:none}"
    "#show-person:checked~.report tr.status:not(.status-manual),"
    "#show-person:checked~.report li.routine,#show-person:checked~.report li.warning:not(.person){display:none}"
)


def _inline(text: str) -> str:
    """Escaped text with its `code` spans as <code> elements: the page never shows a backtick."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: keep the text, without the mark
        return "".join(parts)
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def _status_rows(table: Table) -> list[tuple[str | None, list[Any]]]:
    """The rows with their status key (None for a table without a status column), those that
    need a person first."""
    if "status" not in table.columns:
        return [(None, row) for row in table.rows]
    column = table.columns.index("status")
    by_label = {label: key for key, label in STATUS_LABELS.items()}
    keyed = [(by_label.get(str(row[column])), row) for row in table.rows]
    rank = {key: i for i, key in enumerate(ATTENTION)}
    return sorted(keyed, key=lambda item: rank.get(item[0] or "", len(rank)))


def _row(status: str | None, row: list[Any]) -> str:
    cells = "".join(f"<td>{_inline(str(v))}</td>" for v in row)
    if status is None:
        return f"<tr>{cells}</tr>"
    routine = " routine" if status in ROUTINE else ""
    return f'<tr class="status status-{status}{routine}">{cells}</tr>'


def _attention_counts(assessment: Assessment) -> dict[str, int]:
    counts = dict.fromkeys(ATTENTION, 0)
    for tables in assessment.sections.values():
        for table in tables:
            for status, _ in _status_rows(table):
                if status is not None:
                    counts[status] += 1
    return counts


def to_html(assessment: Assessment) -> str:
    esc = html.escape
    counts = _attention_counts(assessment)
    work = counts["manual"] + counts["reported"] + counts["policy"]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{esc(assessment.title)}</title>", f"<style>{_STYLE}</style></head><body>",
           f"<h1>{esc(assessment.title)}</h1>",
           # the radios are siblings of the report, which the CSS filter needs
           '<b>Show:</b> <input type="radio" name="show" id="show-all" checked>'
           '<label for="show-all">everything</label>'
           '<input type="radio" name="show" id="show-work">'
           f'<label for="show-work">what needs work ({work} of {sum(counts.values())} CUDA locations; '
           "warnings and errors)</label>"
           '<input type="radio" name="show" id="show-person">'
           f'<label for="show-person">what needs a person ({counts["manual"]} CUDA locations; errors)</label>',
           '<div class="report"><ul>']
    out += [f"<li><b>{esc(str(k))}</b>: {_inline(str(v))}</li>" for k, v in assessment.summary.items()]
    out.append("</ul>")
    for name, tables in assessment.sections.items():
        out.append(f"<h2>{esc(HEADINGS[name])}</h2>")
        for table in tables:
            out.append(f"<h3>{_inline(table.title)}</h3>")
            if not table.rows:
                out.append("<p>None found.</p>")
                continue
            out.append("<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in table.columns) + "</tr>")
            out += [_row(status, row) for status, row in _status_rows(table)]
            out.append("</table>")
    if assessment.findings:
        out.append("<h2>Findings</h2><ul>")
        ordered = sorted(assessment.findings, key=lambda d: SEVERITY_ORDER.get(d.severity.value, 3))
        for d in ordered:
            seen = "".join(f"<li>{_inline(item)}</li>" for item in evidence_of(d))
            kind = d.severity.value + (" person" if d.code == STATUS_CODES["manual"] else "") \
                + (" routine" if d.severity.value == "info" else "")
            out.append(f'<li class="{kind}"><code>{esc(d.path)}:{d.line}:{d.col}</code> <b>{esc(d.code)}</b> '
                       f"{_inline(d.message)} (confidence {esc(confidence_of(d))})"
                       + (f"<ul>{seen}</ul>" if seen else "") + "</li>")
        out.append("</ul>")
    for title, errors in (("Files that could not be analysed", assessment.errors),
                          ("Files apply cannot rewrite", assessment.engine_errors)):
        if errors:
            out.append(f"<h2>{esc(title)}</h2><ul>")
            out += [f"<li><code>{esc(e)}</code></li>" for e in errors]
            out.append("</ul>")
    out.append("</div></body></html>")
    return "\n".join(out) + "\n"


def to_terminal(assessment: Assessment, max_rows: int, console: Any) -> str:
    """Print with rich (to `console`, or capture and return the text when none is given)."""
    from rich.console import Console

    capture = console is None
    if capture:
        console = Console(record=True, width=160, color_system=None, force_terminal=False)
    Report(assessment.title, summary=assessment.summary).render(console)
    for name, tables in assessment.sections.items():
        console.rule(f"[bold]{HEADINGS[name]}")
        for table in tables:
            if table.rows:
                console.print(_rich_table(_clip(table, max_rows)))
        empty = [t.title for t in tables if not t.rows]
        if empty:
            console.print("none found: " + "; ".join(empty), markup=False, highlight=False)
    findings = assessment.findings
    if findings:
        console.rule("[bold]Findings")
        shown = findings if not max_rows else findings[:max_rows * 4]
        for finding in shown:
            console.print(finding.format() + f" [confidence {confidence_of(finding)}]", markup=False, highlight=False)
            for item in evidence_of(finding):
                console.print(f"    seen: {item}", markup=False, highlight=False)
        if len(shown) < len(findings):
            console.print(f"… {len(findings) - len(shown)} more findings (use --max-rows 0 or --format markdown/json)")
    for error in assessment.errors + assessment.engine_errors:
        console.print(error, markup=False, highlight=False, style="red")
    return console.export_text() if capture else ""


def _rich_table(table: Table) -> Any:
    """Locations must stay whole on a narrow terminal: cells wrap instead of being cut."""
    from rich.table import Table as RichTable

    rich_table = RichTable(title=table.title, title_justify="left")
    for column in table.columns:
        rich_table.add_column(column, overflow="fold")
    for row in table.rows:
        rich_table.add_row(*(str(v) for v in row))
    return rich_table


def _clip(table: Table, max_rows: int) -> Table:
    if not max_rows or len(table.rows) <= max_rows:
        return table
    rows = table.rows[:max_rows] + [[f"… {len(table.rows) - max_rows} more rows"] + [""] * (len(table.columns) - 1)]
    return Table(table.title, table.columns, rows)

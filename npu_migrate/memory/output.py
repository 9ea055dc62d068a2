"""Typed JSON (docs/schemas/memory-report.schema.json) and plain text for every memory command.

Tables keep raw values (byte counts are `Bytes`, ints that print as '3.03 GiB'), so JSON gets
numbers and text gets readable units from the same rows. Plain text is untruncated: one line
per table row and per finding, then a line counting findings by severity.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Diagnostic, Report, Table
from npu_migrate.memory.context import Bytes

SCHEMA_ID = "https://npu-migrate.dev/schemas/memory-report.schema.json"
SCHEMA_VERSION = 2
SEVERITIES = ("error", "warning", "info")


def plain(value: Any) -> Any:
    """A JSON-ready scalar: numpy numbers become Python numbers, tuples lists."""
    if isinstance(value, Bytes):
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def column_type(values: list[Any]) -> str:
    """bytes, integer, number, boolean or string; null cells do not decide."""
    seen = [v for v in values if v is not None]
    if seen and all(isinstance(v, Bytes) for v in seen):
        return "bytes"
    if seen and all(isinstance(v, (bool, np.bool_)) for v in seen):
        return "boolean"
    if seen and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in seen):
        return "integer"
    if seen and all(isinstance(v, (int, float, np.integer, np.floating)) for v in seen):
        return "number"
    return "string"


def table_json(table: Table) -> dict[str, Any]:
    columns: list[Sequence[Any]] = (list(zip(*table.rows)) if table.rows
                                    else [[] for _ in table.columns])
    types = [column_type(list(c)) for c in columns]
    rows = [[_cell(v, t) for v, t in zip(row, types)] for row in table.rows]
    return {"title": table.title,
            "columns": [{"name": n, "type": t} for n, t in zip(table.columns, types)],
            "rows": rows}


def _cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "string":
        return str(value)
    return plain(value)


def severity_counts(findings: list[Diagnostic]) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        counts[finding.severity.value] += 1
    return counts


def finding_json(finding: Diagnostic, details: dict[int, dict]) -> dict[str, Any]:
    record = {"code": finding.code, "severity": finding.severity.value,
              "message": finding.message, "path": finding.path, "line": finding.line,
              "col": finding.col, "doc": finding.doc,
              "device": None, "event": None}
    record.update(plain({k: v for k, v in details.get(id(finding), {}).items()
                         if k not in ("code", "severity", "message")}))
    return record


def document(kind: str, report: Report, details: dict[int, dict[str, Any]] | None = None,
             devices: list[dict[str, Any]] | None = None,
             flames: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON document of any memory command (`kind`: report, events, blocks, pool, flame,
    compare)."""
    doc = {"$schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "kind": kind,
           "title": report.title, "summary": plain(report.summary),
           "counts": severity_counts(report.findings),
           "devices": plain(devices or []),
           "findings": [finding_json(f, details or {}) for f in report.findings],
           "tables": [table_json(t) for t in report.tables]}
    if flames is not None:
        doc["flames"] = plain(flames)
    return doc


def to_json_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def summary_line(findings: list[Diagnostic]) -> str:
    counts = severity_counts(findings)
    return (f"{len(findings)} findings: {counts['error']} error, {counts['warning']} warning, "
            f"{counts['info']} info")


def to_plain_text(report: Report) -> str:
    """Untruncated text: aligned tables, one line per finding, a count line at the end."""
    lines = [report.title]
    lines += [f"  {key}: {_show(value)}" for key, value in report.summary.items()]
    for table in report.tables:
        lines += ["", table.title]
        cells = [[str(c) for c in table.columns]] + [[_show(v) for v in row]
                                                     for row in table.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
        for row in cells:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if report.findings:
        lines.append("")
    lines += [f.format().replace("\n", " ") for f in report.findings]
    lines += ["", summary_line(report.findings)]
    return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("\n", " ")

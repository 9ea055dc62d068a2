"""A located finding of `analyze` and the helpers that build one. The ANA codes (name, one-line
summary, default severity and page of each) are a table: `npu_migrate/analyze/data/codes.toml`."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from npu_migrate.analyze.data_tables import TABLES
from npu_migrate.core.codes import entries
from npu_migrate.core.diagnostics import Diagnostic, Severity


def default_severity(code: str) -> Severity:
    """The severity an ANA code has unless its finding says otherwise (`codes.toml`)."""
    return _severities()[code]


@functools.cache
def _severities() -> dict[str, Severity]:
    return {code: Severity(entry["severity"]) for code, entry in entries(TABLES).items()}


CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True)
class Finding(Diagnostic):
    """A claim of `analyze` with what it saw (`evidence`: one short line per fact, each naming
    the source line it read) and how sure it is (`confidence`: high, medium or low)."""

    evidence: tuple[str, ...] = ()
    confidence: str = "high"


# what a finding can point at: a statement or an expression (they carry a position; `ast.AST` does not)
Located = ast.stmt | ast.expr


def finding(code: str, path: str, where: Located | tuple[int, int], message: str,
            severity: Severity | None = None, evidence: tuple[str, ...] | list[str] = (),
            confidence: str = "high") -> Finding:
    line, col = where if isinstance(where, tuple) else (where.lineno, where.col_offset + 1)
    return Finding(code, message, path, line, col, severity or default_severity(code),
                   evidence=tuple(evidence), confidence=confidence)


def seen(label: str, lines: list[str], line: int) -> str:
    """One evidence line: what was seen, where, and the source text there (shortened)."""
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if len(text) > 90:
        text = text[:87] + "..."
    return f"{label}: line {line}" + (f" `{text}`" if text else "")


def sarif_rules() -> dict[str, tuple[str, str, str | None]]:
    """Rule metadata for npu_migrate.core.sarif.to_sarif."""
    return {code: (entry["title"], entry["summary"], None) for code, entry in entries(TABLES).items()}

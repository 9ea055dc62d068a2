"""The shared diagnostic and report model.

Every wing (codemods, analyze, verify, memory) speaks through these types, so output
formats (text, JSON, SARIF, markdown) are written once.
"""

from __future__ import annotations

import enum
import os
import pathlib
from dataclasses import asdict, dataclass, field
from typing import Any

DOCS_RULES = "docs/rules"
# a checkout, or an editable install of one, has docs/ beside the two packages; a wheel has not
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Severity(str, enum.Enum):
    """How bad a diagnostic is. Errors make `apply` exit 1."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def sarif_level(self) -> str:
        return {"error": "error", "warning": "warning", "info": "note"}[self.value]


BUILTIN_PREFIXES = ("NPU", "ANA", "MEM", "VER")
SHOWN_CHARACTERS = 40


def shown(value: str) -> str:
    """A value from the user as a one-line message quotes it: its repr, cut to a readable length
    (a 100,000-character code in `select` must not make a 100,000-character error line)."""
    if len(value) <= SHOWN_CHARACTERS:
        return repr(value)
    return f"{value[:SHOWN_CHARACTERS]!r}… ({len(value):,} characters)"


def doc_link(code: str) -> str:
    """How to read the doc page of a code with any installed copy (a checkout's docs/rules
    folder is not there in an installed wheel): the command that prints it."""
    return f"npu-migrate rules {code}"


def doc_url(code: str) -> str | None:
    """A code's page as a `file:` URI where the page exists on this machine (SARIF `helpUri`): a
    checkout or an editable install has docs/rules/CODE.md beside the packages. None elsewhere: a
    wheel carries no docs folder (`npu-migrate rules CODE`, which the `help` text names, prints the
    page from any installed copy), and no web address is given that the tool cannot check exists
    (the project has no published release to point at)."""
    page = os.path.join(_CHECKOUT, DOCS_RULES, f"{code}.md")
    return pathlib.Path(page).as_uri() if os.path.isfile(page) else None


@dataclass(frozen=True)
class Diagnostic:
    """One finding at a source location. `line` and `col` are 1-based; 0 means 'whole file'."""

    code: str
    message: str
    path: str = "<stdin>"
    line: int = 0
    col: int = 0
    severity: Severity = Severity.WARNING
    end_line: int | None = None
    end_col: int | None = None

    @property
    def doc(self) -> str:
        return doc_link(self.code)

    def format(self, with_doc: bool = True) -> str:
        """Compiler style: `path:line:col: CODE message (doc link)`."""
        text = f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"
        return f"{text} ({self.doc})" if with_doc else text

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        data["doc"] = self.doc
        return data

    def with_path(self, path: str) -> Diagnostic:
        return Diagnostic(self.code, self.message, path, self.line, self.col,
                          self.severity, self.end_line, self.end_col)


@dataclass(frozen=True)
class Edit:
    """One rewrite a rule made, explained: what changed and where (position in the original)."""

    code: str
    message: str
    line: int
    col: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Table:
    """A titled table; rendered by rich on a terminal, as markdown or JSON elsewhere."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": self.columns, "rows": self.rows}

    def to_markdown(self) -> str:
        def cell(value: Any) -> str:
            return str(value).replace("|", "\\|").replace("\n", " ")

        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"


@dataclass
class Report:
    """What analyze, verify and memory produce: findings, tables and a summary mapping."""

    title: str
    findings: list[Diagnostic] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "summary": self.summary,
            "findings": [d.to_dict() for d in self.findings],
            "tables": [t.to_dict() for t in self.tables],
        }

    def to_markdown(self) -> str:
        parts = [f"# {self.title}", ""]
        if self.summary:
            parts += [f"- **{k}**: {v}" for k, v in self.summary.items()] + [""]
        parts += [t.to_markdown() for t in self.tables]
        if self.findings:
            parts += ["### Findings", ""]
            parts += [f"- `{d.format(with_doc=False)}`" for d in self.findings]
        return "\n".join(parts) + "\n"

    def render(self, console: Any) -> None:
        """Print with rich (imported lazily: start-up time matters for pre-commit)."""
        from rich.table import Table as RichTable

        console.print(f"[bold]{self.title}[/bold]")
        for key, value in self.summary.items():
            console.print(f"  {key}: {value}")
        for table in self.tables:
            rich_table = RichTable(title=table.title, title_justify="left")
            for column in table.columns:
                rich_table.add_column(column)
            for row in table.rows:
                rich_table.add_row(*(str(v) for v in row))
            console.print(rich_table)
        for finding in self.findings:
            console.print(finding.format(), markup=False, highlight=False)

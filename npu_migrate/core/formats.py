"""Output formats for located diagnostics, named as ruff names them:

- `text`: `path:line:col: CODE [severity] message (npu-migrate rules CODE)`, one per line
- `concise`: the same without the doc pointer
- `grouped`: a header line per file, then `  line:col CODE [severity] message`
- `github`: GitHub Actions workflow commands (`::warning file=…,line=…,col=…,title=CODE::message`),
  shown as annotations on the pull request
- `gitlab`: a GitLab Code Quality report (a JSON list)
- `json` and `sarif` are built by the caller (they carry more than diagnostics).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence

from npu_migrate.core.diagnostics import Diagnostic, Severity, doc_link

FORMATS = ("text", "concise", "grouped", "json", "sarif", "github", "gitlab")
# printed as each file's result arrives; the others are written once at the end
STREAMED = ("text", "concise", "github")

_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
# GitLab Code Quality severities: info, minor, major, critical, blocker
_GITLAB_SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def text_line(diagnostic: Diagnostic, with_doc: bool = True) -> str:
    d = diagnostic
    line = f"{d.path}:{d.line}:{d.col}: {d.code} [{d.severity.value}] {d.message}"
    return f"{line} ({doc_link(d.code)})" if with_doc else line


def _github_escape(text: str, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def github_line(diagnostic: Diagnostic) -> str:
    """One workflow command. Positions of 0 (a whole-file finding) are left out, as GitHub
    wants lines and columns from 1."""
    d = diagnostic
    properties = [f"file={_github_escape(d.path.replace(chr(92), '/'), True)}"]
    if d.line >= 1:
        properties.append(f"line={d.line}")
        if d.col >= 1:
            properties.append(f"col={d.col}")
        if d.end_line and d.end_line >= d.line:
            properties.append(f"endLine={d.end_line}")
    properties.append(f"title={_github_escape(d.code, True)}")
    message = _github_escape(f"{d.code} {d.message}")
    return f"::{_GITHUB_LEVEL[d.severity]} {','.join(properties)}::{message}"


def streamed_lines(diagnostics: Iterable[Diagnostic], fmt: str) -> list[str]:
    if fmt == "github":
        return [github_line(d) for d in diagnostics]
    return [text_line(d, with_doc=fmt == "text") for d in diagnostics]


def grouped(diagnostics: Sequence[Diagnostic]) -> str:
    out: list[str] = []
    path = None
    for d in diagnostics:
        if d.path != path:
            if path is not None:
                out.append("")
            path = d.path
            out.append(f"{path}:")
        out.append(f"  {d.line}:{d.col} {d.code} [{d.severity.value}] {d.message}")
    return "\n".join(out) + ("\n" if out else "")


def gitlab(diagnostics: Sequence[Diagnostic]) -> str:
    """GitLab Code Quality JSON. The fingerprint is stable across runs and line shifts: the
    code, path and message, and which occurrence of that triple it is."""
    seen: Counter[tuple[str, str, str]] = Counter()
    report = []
    for d in diagnostics:
        key = (d.code, d.path, d.message)
        seen[key] += 1
        fingerprint = hashlib.sha256("\0".join([*key, str(seen[key])]).encode()).hexdigest()
        report.append({
            "description": f"{d.code} {d.message}",
            "check_name": d.code,
            "fingerprint": fingerprint,
            "severity": _GITLAB_SEVERITY[d.severity],
            "location": {"path": d.path.replace("\\", "/"), "lines": {"begin": max(d.line, 1)}},
        })
    return json.dumps(report, indent=2) + "\n"


def severity_counts(diagnostics: Iterable[Diagnostic]) -> Counter[str]:
    return Counter(d.severity.value for d in diagnostics)


def severity_line(counts: Counter[str]) -> str:
    """`3 diagnostics: 1 error, 2 warnings, 0 info`."""
    total = sum(counts.values())
    errors, warnings, infos = counts["error"], counts["warning"], counts["info"]
    return (f"{total} diagnostic{'s' * (total != 1)}: {errors} error{'s' * (errors != 1)}, "
            f"{warnings} warning{'s' * (warnings != 1)}, {infos} info")


def statistics(rows: Iterable[tuple[str, str, str]]) -> list[str]:
    """`--statistics`: one line per (code, severity, name), most frequent first."""
    counts = Counter(rows)
    if not counts:
        return []
    width = len(str(max(counts.values())))
    return [f"{n:>{width}}  {code:<7} [{severity}] {name}"
            for (code, severity, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

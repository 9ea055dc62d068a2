"""`apply --format sarif`: a whole run as one SARIF log. Pending rewrites are results too
(a CUDA usage that a fix would change), so code scanning shows them inline before migration."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from npu_migrate import __version__
from npu_migrate.apply.runner import FileResult
from npu_migrate.core.diagnostics import Diagnostic, Severity
from npu_migrate.core.sarif import to_sarif

FAILURE_CODE = "NPU000"
_POSITION = re.compile(r"^(?P<path>.*?):(?P<line>\d+):(?P<col>\d+): (?P<message>.*)$")


def failure_diagnostic(error: str, path: str) -> Diagnostic:
    match = _POSITION.match(error)
    if match is None:
        return Diagnostic(FAILURE_CODE, error, path, 0, 0, Severity.ERROR)
    return Diagnostic(FAILURE_CODE, match["message"], path, int(match["line"]), int(match["col"]),
                      Severity.ERROR)


def run_to_sarif(results: Iterable[FileResult]) -> dict[str, Any]:
    from codemods.api.registry import all_rules

    diagnostics: list[Diagnostic] = []
    for result in results:
        outcome = result.outcome
        if outcome.error:
            diagnostics.append(failure_diagnostic(outcome.error, outcome.path))
        diagnostics += [Diagnostic(e.code, f"fixable: {e.message}", outcome.path, e.line, e.col,
                                   Severity.WARNING) for e in outcome.edits]
        diagnostics += outcome.diagnostics
    rules = {r.code: (r.name, r.summary, None) for r in all_rules()}
    rules[FAILURE_CODE] = ("file-failed", "The file could not be migrated and was left untouched", None)
    return to_sarif(diagnostics, rules, __version__)

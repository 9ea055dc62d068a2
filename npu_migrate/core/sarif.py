"""A SARIF 2.1.0 writer for any list of Diagnostics, so code-scanning services (GitHub, GitLab,
Azure DevOps) show the findings inline. Shared by `analyze --format sarif` and `apply`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from npu_migrate.core.diagnostics import Diagnostic, doc_link, doc_url

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def artifact_uri(path: str) -> str:
    """A relative, forward-slash, percent-encoded URI reference (absolute paths become file URIs)."""
    if os.path.isabs(path):
        return "file://" + quote(path.replace(os.sep, "/"))
    normalised = os.path.normpath(path).replace(os.sep, "/")
    return quote(normalised)


def to_sarif(diagnostics: Iterable[Diagnostic],
             rules: Mapping[str, tuple[str, str, str | None]],
             tool_version: str, tool_name: str = "npu-migrate") -> dict[str, Any]:
    """One SARIF log with one run. `rules` maps a code to (name, summary, help_uri or None);
    codes of diagnostics missing from it get a minimal rule entry of their own. A missing
    help_uri is the code's page where it exists on this machine (`doc_url`), else left out."""
    diagnostics = list(diagnostics)
    codes = list(rules)
    for diagnostic in diagnostics:
        if diagnostic.code not in rules and diagnostic.code not in codes:
            codes.append(diagnostic.code)
    index = {code: i for i, code in enumerate(codes)}
    descriptors = []
    for code in codes:
        name, summary, help_uri = rules.get(code, (code, code, None))
        descriptor: dict[str, Any] = {
            "id": code, "name": name,
            "shortDescription": {"text": summary},
            "help": {"text": f"{summary}. See {doc_link(code)}."},
        }
        help_uri = help_uri or doc_url(code)
        if help_uri:
            descriptor["helpUri"] = help_uri
        descriptors.append(descriptor)
    results = [_result(d, index[d.code]) for d in diagnostics]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": tool_name, "version": tool_version,
                                "rules": descriptors}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def _result(diagnostic: Diagnostic, rule_index: int) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(diagnostic.path)}}
    if diagnostic.line >= 1:
        region: dict[str, Any] = {"startLine": diagnostic.line}
        if diagnostic.col >= 1:
            region["startColumn"] = diagnostic.col
        if diagnostic.end_line and diagnostic.end_line >= diagnostic.line:
            region["endLine"] = diagnostic.end_line
            if diagnostic.end_col and diagnostic.end_col >= 1:
                region["endColumn"] = diagnostic.end_col
        location["region"] = region
    return {
        "ruleId": diagnostic.code,
        "ruleIndex": rule_index,
        "level": diagnostic.severity.sarif_level,
        "message": {"text": diagnostic.message},
        "locations": [{"physicalLocation": location}],
    }

"""The end-of-run summary: files scanned / changed / failed, edits per rule, diagnostics per
code, and roll-ups per top-level package for monorepo runs."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from npu_migrate.apply.runner import FileResult


@dataclass
class RunSummary:
    scanned: int = 0
    changed: int = 0
    failed: int = 0
    parsed: int = 0
    cached: int = 0
    skipped: int = 0  # not regular files (links, FIFOs, devices), each with a note
    errors: int = 0  # error-level diagnostics
    edits: Counter[str] = field(default_factory=Counter)
    diagnostics: Counter[str] = field(default_factory=Counter)
    packages: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, result: FileResult, package: str) -> None:
        outcome = result.outcome
        self.scanned += 1
        self.parsed += outcome.parsed
        self.cached += result.cached
        roll = self.packages.setdefault(package, Counter())
        roll["files"] += 1
        self.skipped += outcome.note is not None
        if outcome.error:
            self.failed += 1
            roll["failed"] += 1
            self.failures.append(outcome.error)
        if outcome.changed:
            self.changed += 1
            roll["changed"] += 1
        for edit in outcome.edits:
            self.edits[edit.code] += 1
        roll["edits"] += len(outcome.edits)
        roll["diagnostics"] += len(outcome.diagnostics)
        for diagnostic in outcome.diagnostics:
            self.diagnostics[diagnostic.code] += 1
            self.errors += diagnostic.severity.value == "error"

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_scanned": self.scanned, "files_changed": self.changed,
            "files_failed": self.failed, "files_parsed": self.parsed, "files_cached": self.cached,
            "files_skipped": self.skipped,
            "error_diagnostics": self.errors,
            "edits_per_rule": dict(sorted(self.edits.items())),
            "diagnostics_per_code": dict(sorted(self.diagnostics.items())),
            "packages": {k: dict(v) for k, v in sorted(self.packages.items())},
            "failures": self.failures,
        }

    def lines(self, verb: str) -> list[str]:
        out = [f"{self.scanned} file(s) scanned, {self.changed} {verb}, {self.failed} failed"
               + (f", {self.skipped} skipped" if self.skipped else "")
               + (f" ({self.cached} from cache)" if self.cached else "")]
        if self.edits:
            out.append("edits per rule: " + ", ".join(f"{c} {n}" for c, n in sorted(self.edits.items())))
        if self.diagnostics:
            out.append("diagnostics per code: "
                       + ", ".join(f"{c} {n}" for c, n in sorted(self.diagnostics.items())))
        if len(self.packages) > 1:
            out.append("per package: " + "; ".join(
                f"{name}: {roll['changed']}/{roll['files']} changed"
                + (f", {roll['failed']} failed" if roll["failed"] else "")
                for name, roll in sorted(self.packages.items())))
        if self.failures:
            out.append("failed files (left untouched):")
            out += [f"  {failure}" for failure in self.failures]
        return out


def package_of(path: str, roots: list[str]) -> str:
    """The top-level package (first folder below the given root) a file belongs to."""
    absolute = os.path.abspath(path)
    for root in roots:
        root_abs = os.path.abspath(root)
        if os.path.isdir(root_abs) and (absolute + os.sep).startswith(root_abs + os.sep):
            relative = os.path.relpath(absolute, root_abs).split(os.sep)
            return relative[0] if len(relative) > 1 else "."
    return "."

"""What happened to one file: the engine's answer, which the cache stores and the reports print.
Kept apart from the engine so that a run served from the cache never imports the engine (nor
LibCST, nor a rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity


@dataclass
class FileOutcome:
    """What happened to one file. `new_text` is None when nothing changed."""

    path: str
    new_text: str | None = None
    edits: list[Edit] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    parsed: bool = False  # whether LibCST was needed at all
    note: str | None = None  # why the file was skipped (not a regular file), when it was

    @property
    def changed(self) -> bool:
        return self.new_text is not None

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)

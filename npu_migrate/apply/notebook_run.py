"""Migrating a notebook: its code cells go through the engine as one Python text
(`npu_migrate.core.notebooks`), and the results come back into the notebook: changed cells'
`source` only, edits and diagnostics placed at `cell N, line L` (the message starts with
`cell N:`, the line is the line within that cell). The `!command` lines of the cells go through
the shell rules, report-only: a rewrite they would make is reported, since an IPython line is
given back to the notebook as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity
from npu_migrate.core.notebooks import Extracted, NotebookError, extract, reassemble, shell_lines, split

# the path the code cells are migrated under (never a notebook path, so never routed back here)
CELLS_SUFFIX = "#cells.py"
SHELL_SUFFIX = "#shell.sh"  # and their `!command` lines under this one


def migrate_notebook(text: str, path: str, migrate_python: Callable[[str, str], Any],
                     outcome_type: Callable[..., Any],
                     migrate_shell: Callable[[str, str], Any] | None = None) -> Any:
    """`migrate_python(text, path)` is the engine's Python migration, `migrate_shell(text, path)`
    its shell one (None: no shell rule selected) and `outcome_type` its FileOutcome (passed in:
    the engine imports this module, not the other way round)."""
    FileOutcome = outcome_type
    try:
        extracted = extract(text)
    except NotebookError as exc:
        return FileOutcome(path, error=f"{path}:0:0: cannot read the notebook: {exc}; file left untouched")
    if not extracted.cells:
        return FileOutcome(path)
    inner = migrate_python(extracted.text, path + CELLS_SUFFIX)
    outcome = FileOutcome(path, parsed=inner.parsed)  # type: ignore[attr-defined]
    if inner.error:  # type: ignore[attr-defined]
        outcome.error = inner.error.replace(path + CELLS_SUFFIX, path)  # type: ignore[attr-defined]
        return outcome
    for edit in inner.edits:  # type: ignore[attr-defined]
        cell, line = extracted.locate(edit.line)
        outcome.edits.append(Edit(edit.code, f"cell {cell}: {edit.message}", line, edit.col))
    for d in inner.diagnostics:  # type: ignore[attr-defined]
        cell, line = extracted.locate(d.line)
        outcome.diagnostics.append(Diagnostic(d.code, f"cell {cell}: {d.message}", path, line, d.col, d.severity))
    if migrate_shell is not None:
        outcome.diagnostics += _shell_diagnostics(extracted, path, migrate_shell)
    if inner.new_text is not None:  # type: ignore[attr-defined]
        new_text = reassemble(text, extracted, split(extracted, inner.new_text))  # type: ignore[attr-defined]
        try:
            json.loads(new_text)
        except ValueError:
            outcome.error = f"{path}:0:0: the rewritten notebook is not valid JSON; file left untouched " \
                            "(please report this as a bug)"
            outcome.edits = []
            return outcome
        if new_text != text:
            outcome.new_text = new_text
    return outcome


def _shell_diagnostics(extracted: Extracted, path: str, migrate_shell: Callable[[str, str], Any]) -> list[Diagnostic]:
    """What the shell rules say about the cells' `!command` lines (latent-diffusion's notebook
    runs `!nvidia-smi`), placed at `cell N, line L`; a rewrite they would make becomes a warning."""
    lines = shell_lines(extracted)
    if not lines:
        return []
    shell = migrate_shell("\n".join(command for _, _, command in lines) + "\n", path + SHELL_SUFFIX)
    found = []
    for item in [*shell.diagnostics, *shell.edits]:
        at, col, _ = lines[item.line - 1]
        cell, line = extracted.locate(at)
        if isinstance(item, Edit):
            message, severity = (f"{item.message} (in a `!` line of a notebook: not rewritten, edit it by hand)",
                                 Severity.WARNING)
        else:
            message, severity = item.message, item.severity
        found.append(Diagnostic(item.code, f"cell {cell}: {message}", path, line, col + item.col - 1, severity))
    return sorted(found, key=lambda d: (d.line, d.col, d.code))

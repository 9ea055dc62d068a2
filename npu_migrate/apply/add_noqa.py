"""`apply --add-noqa`: write `# npu-migrate: ignore[CODE]` on each line that still has a
diagnostic, so a codebase can adopt a rule set and fix the rest later (ruff's --add-noqa).
The file is otherwise left as it is; a line that already has such a comment gets the new codes
added to it."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from npu_migrate.apply.grammar import is_valid_python
from npu_migrate.core.diagnostics import Diagnostic
from npu_migrate.core.sources import SourceError, read_source, write_atomic

_EXISTING = re.compile(r"#\s*npu-migrate:\s*ignore\[([A-Za-z0-9_,\s]*)\]")
_LINE_END = re.compile(r"(\r\n|\r|\n)?$")


def add_suppressions(path: str, diagnostics: Sequence[Diagnostic]) -> tuple[int, str | None]:
    """(suppressions added, problem or None). Nothing is written when the result would not
    parse (a diagnostic on a line ending in a backslash or inside a string)."""
    codes_by_line: dict[int, set[str]] = defaultdict(set)
    for diagnostic in diagnostics:
        if diagnostic.line >= 1:
            codes_by_line[diagnostic.line].add(diagnostic.code)
    if not codes_by_line:
        return 0, None
    try:
        source = read_source(path)
    except SourceError as exc:
        return 0, str(exc)
    lines = source.text.splitlines(keepends=True)
    added = 0
    for number, codes in sorted(codes_by_line.items()):
        if number > len(lines):
            continue
        line = lines[number - 1]
        ending = _LINE_END.search(line).group(1) or ""  # type: ignore[union-attr]
        body = line[:len(line) - len(ending)]
        if body.rstrip().endswith("\\"):
            return 0, f"line {number} ends with a backslash: no suppression added to this file"
        existing = _EXISTING.search(body)
        if existing:
            present = {c.strip() for c in existing.group(1).split(",") if c.strip()}
            merged = ", ".join(sorted(present | codes))
            body = body[:existing.start(1)] + merged + body[existing.end(1):]
            added += len(codes - present)
        else:
            body = f"{body.rstrip()}  # npu-migrate: ignore[{', '.join(sorted(codes))}]"
            added += len(codes)
        lines[number - 1] = body + ending
    new_text = "".join(lines)
    if path.endswith(".py") and not is_valid_python(new_text):
        return 0, "a suppression comment would not parse here: no suppression added to this file"
    if new_text != source.text:
        write_atomic(path, source.encode(new_text))
    return added, None

"""`# npu-migrate: ignore[CODE, ...]` on a line and `# npu-migrate: skip-file` for a file."""

from __future__ import annotations

import re

_IGNORE = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")
SKIP_FILE = re.compile(r"^\s*#\s*npu-migrate:\s*skip-file\b", re.MULTILINE)
ALL = frozenset({"*"})


class Suppressions:
    """Which codes are suppressed on which line. A bare `ignore` suppresses every code;
    a code suppresses itself and, as a prefix (`NPU2`), every code that starts with it."""

    def __init__(self, by_line: dict[int, frozenset[str]] | None = None) -> None:
        self.by_line = by_line or {}

    @classmethod
    def parse(cls, text: str) -> "Suppressions":
        if "npu-migrate" not in text:
            return cls()
        by_line: dict[int, frozenset[str]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if "npu-migrate" not in line:
                continue
            match = _IGNORE.search(line)
            if match:
                codes = match.group(1)
                by_line[number] = (frozenset(c.strip() for c in codes.split(",") if c.strip())
                                   if codes else ALL)
        return cls(by_line)

    def __bool__(self) -> bool:
        return bool(self.by_line)

    def suppresses(self, code: str, line: int) -> bool:
        codes = self.by_line.get(line)
        if not codes:
            return False
        return codes is ALL or any(code.startswith(c) for c in codes)


def skips_file(text: str) -> bool:
    return "skip-file" in text and bool(SKIP_FILE.search(text))

"""`# npu-migrate: ignore[CODE, ...]` (or flake8/ruff's `# noqa: CODE, ...`) on a line and
`# npu-migrate: skip-file` for a file."""

from __future__ import annotations

import re

_IGNORE = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")
# flake8/ruff-style `noqa` comments with codes (NPU101, E501) suppress the listed codes; a bare
# `noqa` is left to the linters it was written for (it would silence every migration on its line)
_NOQA = re.compile(r"#\s*noqa\s*:\s*([A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)", re.IGNORECASE)
SKIP_FILE = re.compile(r"^\s*#\s*npu-migrate:\s*skip-file\b", re.MULTILINE)
ALL = frozenset({"*"})


class Suppressions:
    """Which codes are suppressed on which line. A bare `ignore` suppresses every code;
    a code suppresses itself and, as a prefix (`NPU2`), every code that starts with it."""

    def __init__(self, by_line: dict[int, frozenset[str]] | None = None,
                 written: list[tuple[int, int, str]] | None = None) -> None:
        self.by_line = by_line or {}
        # (line, column, code) of every code in an `npu-migrate: ignore[...]` comment
        self.written = written or []

    @classmethod
    def parse(cls, text: str) -> Suppressions:
        if "npu-migrate" not in text and "noqa" not in text.lower():
            return cls()
        by_line: dict[int, frozenset[str]] = {}
        written: list[tuple[int, int, str]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            codes: set[str] = set()
            match = _IGNORE.search(line) if "npu-migrate" in line else None
            if match and match.group(1) is None:
                by_line[number] = ALL
                continue
            if match:
                for code in re.finditer(r"[^,\s]+", match.group(1)):
                    codes.add(code.group())
                    written.append((number, match.start(1) + code.start() + 1, code.group()))
            noqa = _NOQA.search(line) if "noqa" in line.lower() else None
            if noqa:
                codes.update(c.upper() for c in re.findall(r"[A-Za-z]+[0-9]+", noqa.group(1)))
            if codes:
                by_line[number] = frozenset(codes)
        return cls(by_line, written)

    def unknown(self, known_codes: frozenset[str]) -> list[tuple[int, int, str]]:
        """(line, column, code) of each code in an `npu-migrate: ignore[...]` comment that is
        neither a known code nor a prefix of one (`# noqa` codes belong to other linters too)."""
        return [(line, col, code) for line, col, code in self.written
                if not any(known.startswith(code) for known in known_codes)]

    def __bool__(self) -> bool:
        return bool(self.by_line)

    def suppresses(self, code: str, line: int) -> bool:
        codes = self.by_line.get(line)
        if not codes:
            return False
        return codes is ALL or any(code.startswith(c) for c in codes)


def skips_file(text: str) -> bool:
    return "skip-file" in text and bool(SKIP_FILE.search(text))

"""`# npu-migrate: ignore[CODE, ...]` (or flake8/ruff's `# noqa: CODE, ...`) on a line and
`# npu-migrate: skip-file` for a file.

A malformed `ignore` comment (an unclosed `[`, an empty `[]`, something that is not a code, text
right after `ignore`) silences nothing and is reported (NPU002): read leniently, `ignore[NPU101,,`
would silence every code on its line, which is the opposite of what its author asked for."""

from __future__ import annotations

import re

# `ignore` as a whole word: `ignored` or `ignore-all` are not the directive
_IGNORE = re.compile(r"#\s*npu-migrate:\s*ignore(?![\w-])")
_ITEM = re.compile(r"[^,\s]+")
_CODE = re.compile(r"[A-Za-z0-9_]+")
# flake8/ruff-style `noqa` comments with codes (NPU101, E501) suppress the listed codes; a bare
# `noqa` is left to the linters it was written for (it would silence every migration on its line)
_NOQA = re.compile(r"#\s*noqa\s*:\s*([A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)", re.IGNORECASE)
SKIP_FILE = re.compile(r"^\s*#\s*npu-migrate:\s*skip-file\b", re.MULTILINE)
ALL = frozenset({"*"})
_USAGE = "it silences nothing; write `# npu-migrate: ignore[CODE, ...]`, or a bare `ignore` for every code"


class Suppressions:
    """Which codes are suppressed on which line. A bare `ignore` suppresses every code;
    a code suppresses itself and, as a prefix (`NPU2`), every code that starts with it."""

    def __init__(self, by_line: dict[int, frozenset[str]] | None = None,
                 written: list[tuple[int, int, str]] | None = None,
                 malformed: list[tuple[int, int, str]] | None = None) -> None:
        self.by_line = by_line or {}
        # (line, column, code) of every code in an `npu-migrate: ignore[...]` comment
        self.written = written or []
        # (line, column, what is wrong) of every `npu-migrate: ignore` comment that silences nothing
        self.malformed = malformed or []

    @classmethod
    def parse(cls, text: str) -> Suppressions:
        if "npu-migrate" not in text and "noqa" not in text.lower():
            return cls()
        found = cls()
        for number, line in enumerate(text.splitlines(), start=1):
            codes: set[str] = set()
            match = _IGNORE.search(line) if "npu-migrate" in line else None
            if match and found._read_ignore(line, number, match, codes):
                found.by_line[number] = ALL
                continue
            noqa = _NOQA.search(line) if "noqa" in line.lower() else None
            if noqa:
                codes.update(c.upper() for c in re.findall(r"[A-Za-z]+[0-9]+", noqa.group(1)))
            if codes:
                found.by_line[number] = frozenset(codes)
        return found

    def _read_ignore(self, line: str, number: int, match: re.Match[str], codes: set[str]) -> bool:
        """Read the `ignore` comment `match` found: add its codes to `codes`, note it if it is
        malformed, and say whether it is a bare `ignore` (every code)."""
        rest = line[match.end():]
        after = rest.lstrip()
        at = match.end() + len(rest) - len(after)  # 0-based offset of what follows `ignore`
        if not after or after.startswith("#"):
            return True
        if not after.startswith("["):
            shown = after.split("#", 1)[0].strip()
            self.malformed.append((number, at + 1, f"`{shown}` after `ignore` ({_USAGE})"))
            return False
        close = line.find("]", at)
        if close < 0:
            self.malformed.append((number, at + 1, f"unclosed `[` ({_USAGE})"))
            return False
        items = list(_ITEM.finditer(line, at + 1, close))
        if not items:
            self.malformed.append((number, at + 1, f"empty `[]` ({_USAGE})"))
            return False
        bad = [item for item in items if not _CODE.fullmatch(item.group())]
        if bad:
            self.malformed.append((number, bad[0].start() + 1, f"`{bad[0].group()}` is not a code ({_USAGE})"))
            return False
        for item in items:
            codes.add(item.group())
            self.written.append((number, item.start() + 1, item.group()))
        return False

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

"""Allocation sites and categories from call stacks (innermost frame first)."""

from __future__ import annotations

import re
from functools import lru_cache

from npu_migrate.memory.data_tables import TABLES

Frame = tuple[str, str, int]
# pseudo frame files of msMemScope rows without a Python stack -> the word that names them
PSEUDO_FILES = {"<operator>": "operator", "<owner>": "owner"}
NO_STACK = "<no stack recorded>"


@lru_cache(maxsize=1)
def _rules() -> tuple[re.Pattern, list[tuple[str, re.Pattern, re.Pattern | None]]]:
    data = TABLES.load("categories.json")
    library = re.compile("|".join(data["library_files"]))
    rules = [(r["category"], re.compile(r["name"]), re.compile(r["file"]) if r["file"] else None)
             for r in data["rules"]]
    return library, rules


@lru_cache(maxsize=1)
def _internals() -> re.Pattern:
    return re.compile(TABLES.load("categories.json")["allocator_internals"])


def is_library(frame: Frame) -> bool:
    return bool(_rules()[0].search(frame[1]))


def site_of(stack: tuple[Frame, ...]) -> str:
    """The innermost user frame as `file.py:line (function)`; library frames are skipped, and
    a stack of library frames only gives its innermost Python frame."""
    if not stack:
        return NO_STACK
    chosen = next((f for f in stack if not is_library(f)), None)
    if chosen is None:  # all library code: the innermost Python frame, else the innermost
        internals = _internals()  # C++ frame outside the allocator itself
        chosen = next((f for f in stack if f[1].endswith(".py")), None) or next(
            (f for f in stack if not internals.search(f[0])), stack[0])
    name, filename, line = chosen
    if filename in PSEUDO_FILES:  # msMemScope rows without a Python stack
        return f"{PSEUDO_FILES[filename]} {name}"
    return f"{filename.rsplit('/', 1)[-1]}:{line} ({name})"


def frame_label(frame: Frame) -> str:
    """One frame as `file:line function`, or `operator NAME` / `owner LABEL` for the pseudo
    frames msMemScope rows get in place of a Python stack."""
    name, filename, line = frame
    if filename in PSEUDO_FILES:
        return f"{PSEUDO_FILES[filename]} {name}"
    return f"{filename}:{line} {name}"


def category_of(stack: tuple[Frame, ...]) -> str:
    _, rules = _rules()
    for category, name_re, file_re in rules:
        for name, filename, _ in stack:
            if name_re.search(name) and (file_re is None or file_re.search(filename)):
                return category
    return "other"


def format_stack(stack: tuple[Frame, ...], limit: int = 40) -> list[str]:
    """Outermost first, as Python tracebacks read; C++ unwinder noise ('??' files) dropped."""
    frames = [f for f in stack if f[1] != "??"] or list(stack)
    return [frame_label(f) for f in reversed(frames[:limit])]


class SiteTable:
    """Caches site and category per stack index of a snapshot."""

    def __init__(self, stacks: list[tuple[Frame, ...]]):
        self.stacks = stacks
        self._site: dict[int, str] = {}
        self._category: dict[int, str] = {}
        self._full: dict[int, str] = {}

    def site(self, stack: int) -> str:
        if stack not in self._site:
            self._site[stack] = site_of(self.stacks[stack]) if stack >= 0 else NO_STACK
        return self._site[stack]

    def full(self, stack: int) -> str:
        """The whole stack on one line, innermost frame first (for exports)."""
        if stack not in self._full:
            frames = format_stack(self.stacks[stack], limit=1 << 16) if stack >= 0 else []
            self._full[stack] = " <- ".join(reversed(frames))
        return self._full[stack]

    def category(self, stack: int) -> str:
        if stack not in self._category:
            self._category[stack] = category_of(self.stacks[stack]) if stack >= 0 else "unknown"
        return self._category[stack]

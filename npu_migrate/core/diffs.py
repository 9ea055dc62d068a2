"""Unified diffs, plain or coloured for a terminal."""

from __future__ import annotations

import difflib

from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX, cell_diff

_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_RESET = "\x1b[0m"


def unified_diff(old: str, new: str, path: str) -> str:
    if path.endswith(NOTEBOOK_SUFFIX):  # hunks relative to each changed code cell
        return cell_diff(old, new, path) or _plain(old, new, path)
    return _plain(old, new, path)


def _plain(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def colourise(diff: str) -> str:
    out = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            out.append(f"\x1b[1m{line.rstrip()}{_RESET}\n")
            continue
        colour = _COLOURS.get(line[:1])
        out.append(f"{colour}{line.rstrip()}{_RESET}\n" if colour else line)
    return "".join(out)

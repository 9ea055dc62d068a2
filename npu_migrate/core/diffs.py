"""Unified diffs, plain or coloured for a terminal. File names in the `---`/`+++` headers are
quoted as git quotes them (`core.quotePath`, its default): a name holding a control character,
a quote, a backslash or a non-ASCII byte becomes a C-style string, so an escape sequence in a
name never reaches the terminal raw and `git apply` reads the patch."""

from __future__ import annotations

import difflib
import os

from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX, cell_diff

_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_RESET = "\x1b[0m"


def unified_diff(old: str, new: str, path: str) -> str:
    if path.endswith(NOTEBOOK_SUFFIX):  # hunks relative to each changed code cell
        return cell_diff(old, new, path, git_quoted) or _plain(old, new, path)
    return _plain(old, new, path)


def _plain(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=_header_name("a/", path), tofile=_header_name("b/", path))
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


_LETTER_ESCAPES = {0x07: "a", 0x08: "b", 0x09: "t", 0x0A: "n", 0x0B: "v", 0x0C: "f", 0x0D: "r",
                   0x22: '"', 0x5C: "\\"}


def _header_name(prefix: str, path: str) -> str:
    """git ends a header name holding a space with a tab, so that patch(1) reads it whole."""
    return git_quoted(prefix + path) + ("\t" if " " in path else "")


def git_quoted(name: str) -> str:
    """`name` as git prints it in a diff header: unchanged when every byte is printable ASCII (a
    space included), else in double quotes with `\\t`-style and octal escapes per byte."""
    data = os.fsencode(name)  # undecodable bytes of a file name come back as they were
    if all(0x20 <= byte < 0x7F and byte not in _LETTER_ESCAPES for byte in data):
        return name
    out = []
    for byte in data:
        if byte in _LETTER_ESCAPES:
            out.append("\\" + _LETTER_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'

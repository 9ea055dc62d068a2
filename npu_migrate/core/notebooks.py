"""Jupyter notebooks (`.ipynb`) as Python for the rules, and back, byte for byte.

`extract` turns the code cells of a notebook into one Python text (cells in order, each after a
marker comment line), so that imports in one cell resolve names in the next, as when the
notebook runs top to bottom. IPython lines (`%magic`, `!shell`, `%%cell-magic` cells, `x?`
help) are not Python: they become placeholder comments and come back verbatim. A cell that
does not parse even so (another kernel's syntax) is left out whole.

`reassemble` writes the migrated code back into the original JSON text: only the `source` value
of a changed cell is replaced, in the style the file already uses (a list of lines or one
string, its indentation, ASCII escapes or not); every other byte -- outputs, metadata, the
JSON layout, unchanged cells -- stays as it was.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed

NOTEBOOK_SUFFIX = ".ipynb"
_MARKER = "# %% npu-migrate cell {index}\n"
_MARKER_RE = re.compile(r"# %% npu-migrate cell (\d+)\n")
_PLACEHOLDER = "# npu-migrate-ipython-line {index}"
_PLACEHOLDER_RE = re.compile(r"^(\s*)# npu-migrate-ipython-line (\d+)$")
_IPYTHON = re.compile(r"\s*(?:[%!]|\?\?|\?[A-Za-z_])|.*[A-Za-z_)\]]\?\??\s*$")


class NotebookError(ValueError):
    """The text is not a notebook this module can read."""


@dataclass
class CodeCell:
    index: int  # position in the notebook's `cells` list (0-based)
    source: str  # the cell's code, as in the notebook
    span: tuple[int, int]  # where the `source` JSON value is in the file text
    as_list: bool  # `source` is a list of lines (the usual form), not one string
    python: str = ""  # the code with IPython lines replaced by placeholders
    start: int = 0  # first line of the cell's code in the extracted text (1-based)


@dataclass
class Extracted:
    text: str  # the Python text the rules see
    cells: list[CodeCell] = field(default_factory=list)
    ipython: list[str] = field(default_factory=list)  # the IPython lines, by placeholder index

    def locate(self, line: int) -> tuple[int, int]:
        """Line of the extracted text -> (1-based cell number in the notebook, line in the cell)."""
        current = self.cells[0] if self.cells else None
        for cell in self.cells:
            if cell.start <= line:
                current = cell
        if current is None:
            return 0, line
        return current.index + 1, max(1, line - current.start + 1)


# -- reading the JSON with the places of the `source` values ---------------------------------------
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class _Reader:
    """A JSON reader that also notes where each cell's `source` value lies."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sources: dict[int, tuple[int, int]] = {}

    def _skip(self, at: int) -> int:
        """The offset after the whitespace at `at`."""
        while at < len(self.text) and self.text[at] in " \t\n\r":
            at += 1
        return at

    def value(self, at: int, path: tuple[str | int, ...]) -> tuple[object, int]:
        at = self._skip(at)
        char = self.text[at:at + 1]
        start = at
        if char == "{":
            result: object = {}
            at = self._skip(at + 1)
            if self.text[at:at + 1] == "}":
                return result, at + 1
            while True:
                at = self._skip(at)
                if self.text[at:at + 1] != '"':
                    raise NotebookError(f"expected a key at offset {at}")
                key, at = scanstring(self.text, at + 1)
                at = self._skip(at)
                if self.text[at:at + 1] != ":":
                    raise NotebookError(f"expected ':' at offset {at}")
                item, at = self.value(at + 1, path + (key,))
                result[key] = item  # type: ignore[index]
                at = self._skip(at)
                if self.text[at:at + 1] == ",":
                    at += 1
                    continue
                if self.text[at:at + 1] == "}":
                    return result, at + 1
                raise NotebookError(f"expected ',' or '}}' at offset {at}")
        if char == "[":
            items: list[object] = []
            at = self._skip(at + 1)
            if self.text[at:at + 1] != "]":
                while True:
                    item, at = self.value(at, path + (len(items),))
                    items.append(item)
                    at = self._skip(at)
                    if self.text[at:at + 1] == ",":
                        at += 1
                        continue
                    if self.text[at:at + 1] == "]":
                        break
                    raise NotebookError(f"expected ',' or ']' at offset {at}")
            end = at + 1
            self._note(path, start, end)
            return items, end
        if char == '"':
            string, end = scanstring(self.text, at + 1)
            self._note(path, start, end)
            return string, end
        for literal, python in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(literal, at):
                return python, at + len(literal)
        number = _NUMBER.match(self.text, at)
        if number:
            return json.loads(number.group(0)), number.end()
        raise NotebookError(f"unexpected {char!r} at offset {at}")

    def _note(self, path: tuple[str | int, ...], start: int, end: int) -> None:
        if len(path) == 3 and path[0] == "cells" and path[2] == "source" and isinstance(path[1], int):
            self.sources[path[1]] = (start, end)


def read(text: str) -> tuple[dict[str, Any], dict[int, tuple[int, int]]]:
    reader = _Reader(text)
    try:
        data, end = reader.value(0, ())
    except (ValueError, IndexError) as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    if reader._skip(end) != len(text) or not isinstance(data, dict) \
            or not isinstance(data.get("cells"), list):
        raise NotebookError("not a notebook (no `cells` list)")
    return data, reader.sources


# -- cells <-> Python --------------------------------------------------------------------------------
def _parses(code: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def extract(text: str) -> Extracted:
    data, spans = read(text)
    out = Extracted("")
    pieces: list[str] = []
    line = 1
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or "source" not in cell:
            continue
        raw = cell["source"]
        source = cell_source(raw, index)  # a string or a list: its span is known
        if source.lstrip().startswith("%%"):
            continue  # a cell magic: the whole cell is another language
        lines = []
        for code_line in source.split("\n"):
            if _IPYTHON.match(code_line) and not _parses(code_line.strip() or "pass"):
                indent = code_line[:len(code_line) - len(code_line.lstrip())]
                lines.append(indent + _PLACEHOLDER.format(index=len(out.ipython)))
                out.ipython.append(code_line)
            else:
                lines.append(code_line)
        python = "\n".join(lines)
        if not python.endswith("\n"):
            python += "\n"
        if not _parses(python):
            continue
        marker = _MARKER.format(index=index)
        pieces.append(marker + python)
        out.cells.append(CodeCell(index, source, spans[index], isinstance(raw, list), python, line + 1))
        line += 1 + python.count("\n")
    out.text = "".join(pieces)
    return out


def shell_lines(extracted: Extracted) -> list[tuple[int, int, str]]:
    """The `!command` lines of the code cells, which the rules for Python never see (they are
    placeholders in the extracted text): (line in the extracted text, 1-based column where the
    command starts, the command)."""
    found = []
    for number, line in enumerate(extracted.text.split("\n"), 1):
        match = _PLACEHOLDER_RE.match(line)
        if match is None:
            continue
        original = extracted.ipython[int(match.group(2))]
        stripped = original.lstrip()
        if stripped.startswith("!"):
            command = stripped.lstrip("!")
            found.append((number, len(original) - len(command) + 1, command))
    return found


def split(extracted: Extracted, new_text: str) -> dict[int, str]:
    """Migrated code per cell index, IPython lines put back; only cells that changed."""
    parts = _MARKER_RE.split(new_text)
    head, rest = parts[0], parts[1:]
    changed: dict[int, str] = {}
    by_index = {cell.index: cell for cell in extracted.cells}
    for i in range(0, len(rest), 2):
        index, code = int(rest[i]), rest[i + 1]
        if i == 0 and head:
            code = head + code  # lines a rule put above the first marker (an added import)
        cell = by_index.get(index)
        if cell is None or code == cell.python:
            continue
        restored = []
        for code_line in code.split("\n"):
            match = _PLACEHOLDER_RE.match(code_line)
            restored.append(extracted.ipython[int(match.group(2))] if match else code_line)
        source = "\n".join(restored)
        if not cell.source.endswith("\n") and source.endswith("\n"):
            source = source[:-1]  # the last line of a cell has no newline in the notebook
        if source != cell.source:
            changed[index] = source
    return changed


def _style(original: str) -> tuple[str, str, str, bool]:
    """(after '[', between items, before ']', ensure_ascii) of an original list value."""
    match = re.match(r"\[(\s*)", original)
    first = match.group(1) if match else ""
    between = re.search(r'",(\s*)"', original)
    close = re.search(r"(\s*)\]$", original)
    ascii_only = not any(ord(c) > 127 for c in original)
    return first, "," + (between.group(1) if between else first or "\n"), close.group(1) if close else "", ascii_only


def reassemble(text: str, extracted: Extracted, changed: dict[int, str]) -> str:
    """The notebook text with the `source` of each changed cell replaced, nothing else touched."""
    by_index = {cell.index: cell for cell in extracted.cells}
    out, at = [], 0
    for index in sorted(changed):
        cell = by_index[index]
        start, end = cell.span
        original = text[start:end]
        first, between, close, ascii_only = _style(original)
        if cell.as_list:
            lines = changed[index].splitlines(keepends=True)
            if not lines:
                value = "[]"
            else:
                items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
                value = "[" + first + between.join(items) + close + "]"
        else:
            value = json.dumps(changed[index], ensure_ascii=ascii_only)
        out += [text[at:start], value]
        at = end
    out.append(text[at:])
    return "".join(out)


def cell_diff(old: str, new: str, path: str, quote: Callable[[str], str] = str) -> str:
    """A unified diff per changed code cell (`a/nb.ipynb (cell 3)`), lines relative to the cell;
    `quote` makes a header's file name printable (`diffs.git_quoted`)."""
    try:
        old_cells = _code_cells(old)
        new_cells = _code_cells(new)
    except NotebookError:
        return ""
    out = []
    for index, source in old_cells.items():
        after = new_cells.get(index, source)
        if after == source:
            continue
        label = f"{path} (cell {index + 1})"
        for line in difflib.unified_diff(source.splitlines(keepends=True), after.splitlines(keepends=True),
                                         fromfile=quote(f"a/{label}"), tofile=quote(f"b/{label}")):
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


def _code_cells(text: str) -> dict[int, str]:
    data, _ = read(text)
    found = {}
    for index, cell in enumerate(data["cells"]):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            found[index] = cell_source(cell.get("source", ""), index)
    return found


def cell_source(raw: object, index: int) -> str:
    """A cell's `source` as one text: nbformat's multiline string, a string or a list of strings.
    Anything else makes the notebook unreadable (NotebookError), never a guess at its text."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and all(isinstance(line, str) for line in raw):
        return "".join(raw)
    wrong = next((_json_kind(line) for line in raw if not isinstance(line, str)), "") \
        if isinstance(raw, list) else ""
    kind = f"a list holding {wrong}" if wrong else _json_kind(raw)
    raise NotebookError(f"cell {index + 1}: `source` must be a string or a list of strings, not {kind}")


def _json_kind(value: object) -> str:
    names = {dict: "an object", list: "a list", bool: "a boolean", int: "a number", float: "a number",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)

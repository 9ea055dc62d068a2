"""The pieces of a file that LibCST parses: the file is cut at statement starts, functions and
classes are cut again into their body statements, and long literal displays into runs of their
elements, so a rule's parse costs the statements it may act on, not the file (docs/engine.md)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from codemods.api.prefilter import Prefilter


class PieceMatch:
    """Whether some rule may act on lines [a, b): the raw text for most rules' prefilters, the
    text with long strings blanked for those that act on code alone (`Rule.prefilter_in_code`)."""

    def __init__(self, lines: list[str], raw: Prefilter | None, code_lines: list[str],
                 code: Prefilter | None) -> None:
        self.lines, self.raw, self.code_lines, self.code = lines, raw, code_lines, code
        self.everything = raw is None

    def wants(self, a: int, b: int) -> bool:
        if self.everything:
            return True
        if self.code is not None and self.code.search("".join(self.code_lines[a - 1:b - 1])):
            return True
        assert self.raw is not None
        return self.raw.search("".join(self.lines[a - 1:b - 1]))


@dataclass
class Piece:
    """Lines [start, end) of the file; `indent` was removed from each line to parse a nested
    block on its own (and is put back after); `parse` says whether LibCST must see it."""

    start: int
    end: int
    indent: str
    parse: bool
    part: bool = False  # some elements of a long literal, parsed as the statements `element,`


def _stmt_start(stmt: ast.stmt) -> int:
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])


_NESTABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def plan_pieces(lines: list[str], body: list[ast.stmt], start: int, end: int, indent: str,
                match: PieceMatch, nest: bool = True) -> list[Piece]:
    """Cut lines [start, end) holding `body` at statement starts; comments and blank lines before
    a statement belong to it. A matching function or class is cut again into its header and body
    statements, so LibCST parses only the statements that can need a rule."""
    starts: list[int] = []
    groups: list[list[ast.stmt]] = []
    previous_end = 0
    for stmt in body:
        line = _stmt_start(stmt)
        if starts and line <= previous_end:
            groups[-1].append(stmt)  # `a; b` on one line, or `x = (\n 1); y = 2`
        else:
            starts.append(line)
            groups.append([stmt])
        previous_end = max(previous_end, stmt.end_lineno or line)
    if not starts:
        return [Piece(start, end, indent, match.wants(start, end))]
    starts[0] = start
    pieces = []
    for a, b, group in zip(starts, starts[1:] + [end], groups):
        if not match.wants(a, b):
            pieces.append(Piece(a, b, indent, False))
            continue
        stmt = group[0]
        inner = None
        if nest and len(group) == 1:
            inner = _nested(lines, stmt, a, b, indent, match) or _elements(lines, stmt, a, b, indent, match)
        pieces += inner if inner is not None else [Piece(a, b, indent, True)]
    return pieces


def _nested(lines: list[str], stmt: ast.stmt, a: int, b: int, indent: str,
            match: PieceMatch) -> list[Piece] | None:
    if not isinstance(stmt, _NESTABLE):
        return None
    first = stmt.body[0]
    body_start = _stmt_start(first)
    if body_start <= stmt.lineno or match.wants(a, body_start):
        return None  # one-line def, or the header itself needs a rule: parse the whole statement
    line = lines[first.lineno - 1]
    inner_indent = line[:len(line) - len(line.lstrip(" \t"))]
    if not inner_indent.startswith(indent) or len(inner_indent) <= len(indent):
        return None
    return [Piece(a, body_start, indent, False)] + plan_pieces(
        lines, stmt.body, body_start, b, inner_indent, match)

# a statement this long whose value is a list, tuple or set display is cut at its elements: torch's
# operator tables are single statements of thousands of lines with a device string here and there
_SPLIT_LINES = 20
_SEQUENCES = (ast.List, ast.Tuple, ast.Set)
_AFTER_ELEMENT = re.compile(r"\s*,?\s*(?:#.*)?\r?\n?")  # what may follow an element that ends a run


def _elements(lines: list[str], stmt: ast.stmt, a: int, b: int, indent: str,
              match: PieceMatch) -> list[Piece] | None:
    """A long statement `target = [...]` (or an annotated one, or a bare display) cut into its
    head, runs of elements that start their own line, and its tail, so LibCST parses only the runs
    some rule may want. A run `OpInfo(...),` parses on its own as the statement it spells; displays
    that hold strings (a docstring when first), `:=` or a starred last item are left whole."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) else None
    if not isinstance(value, _SEQUENCES) or len(value.elts) < 2:
        return None
    if (stmt.end_lineno or stmt.lineno) - stmt.lineno < _SPLIT_LINES:
        return None
    first, last = value.elts[0], value.elts[-1]
    if isinstance(last, ast.Starred) or any(  # `*rest` alone is no statement; `*rest,` is
            isinstance(item, (ast.NamedExpr, ast.JoinedStr))
            or (isinstance(item, ast.Constant) and isinstance(item.value, str)) for item in value.elts):
        return None
    end = (last.end_lineno or last.lineno) + 1
    if first.lineno <= value.lineno or not _ends_clean(lines, last) or end > b \
            or match.wants(a, first.lineno) or match.wants(end, b):
        return None
    starts = [item.lineno for previous, item in zip(value.elts, value.elts[1:])
              if item.lineno > (previous.end_lineno or 0) and _starts_line(lines, item) and _ends_clean(lines, previous)]
    if not _starts_line(lines, first):
        return None
    pieces = [Piece(a, first.lineno, indent, False)]
    for start, stop in zip([first.lineno] + starts, starts + [end]):
        line = lines[start - 1]
        run_indent = line[:len(line) - len(line.lstrip(" \t"))]
        if not run_indent.startswith(indent):
            return None
        pieces.append(Piece(start, stop, run_indent, match.wants(start, stop), part=True))
    return pieces + [Piece(end, b, indent, False)]


def _starts_line(lines: list[str], node: ast.expr) -> bool:
    """Only blanks before `node` on its first line (`col_offset` counts UTF-8 bytes: any other
    character before it makes the slice hold more than blanks, so the answer stays no)."""
    return not lines[node.lineno - 1][:node.col_offset].strip(" \t")


def _ends_clean(lines: list[str], node: ast.expr) -> bool:
    """Only a comma, blanks and a comment after `node` on its last line."""
    line = lines[(node.end_lineno or node.lineno) - 1].encode("utf-8")
    rest = line[node.end_col_offset or 0:].decode("utf-8", "replace")
    return _AFTER_ELEMENT.fullmatch(rest) is not None


def dedent_piece(chunk_lines: list[str], indent: str) -> tuple[str, list[int]] | None:
    """Remove up to `indent` from each line; None when a line is indented differently."""
    out, removed = [], []
    for line in chunk_lines:
        stripped = line.lstrip(" \t")
        lead = line[:len(line) - len(stripped)]
        if line.startswith(indent):
            cut = len(indent)
        elif indent.startswith(lead):
            cut = len(lead)  # a comment, blank line or string content further left
        else:
            return None
        out.append(line[cut:])
        removed.append(cut)
    return "".join(out), removed

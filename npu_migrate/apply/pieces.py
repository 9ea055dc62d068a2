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
    text with long strings blanked for those that act on code alone (`Rule.prefilter_in_code`);
    and which compound statements the file's rules allow to cut (`cuttable_blocks`)."""

    def __init__(self, lines: list[str], raw: Prefilter | None, code_lines: list[str],
                 code: Prefilter | None, blocks: frozenset[type[ast.stmt]] = frozenset()) -> None:
        self.lines, self.raw, self.code_lines, self.code = lines, raw, code_lines, code
        self.everything = raw is None
        self.blocks = blocks  # the compound statements that may be cut into their blocks

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
# a compound statement, and the LibCST nodes through which a rule sees that a statement is in one
# of its blocks: a file whose rules handle none of them may have its blocks parsed one by one
_BLOCK_NODES: dict[tuple[type[ast.stmt], ...], frozenset[str]] = {
    (ast.If,): frozenset({"If", "Else", "IndentedBlock"}),
    (ast.For, ast.AsyncFor): frozenset({"For", "Else", "IndentedBlock"}),
    (ast.While,): frozenset({"While", "Else", "IndentedBlock"}),
    (ast.With, ast.AsyncWith): frozenset({"With", "WithItem", "IndentedBlock"}),
    (ast.Try, ast.TryStar): frozenset({"Try", "TryStar", "ExceptHandler", "ExceptStarHandler", "Else",
                                       "Finally", "IndentedBlock"}),
}


def cuttable_blocks(handled: set[str]) -> frozenset[type[ast.stmt]]:
    """The compound statements that may be cut when the file's rules handle the LibCST node
    types `handled`: a rule that visits an `If` must see it whole, with every arm."""
    return frozenset(kind for kinds, nodes in _BLOCK_NODES.items() if not nodes & handled for kind in kinds)


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
    """A function or class, or a compound statement of a kind `match.blocks` allows, cut into its
    headers (`if ...:`, `else:`, `except ...:`) and the statements of its blocks, when no header
    needs a rule."""
    if isinstance(stmt, _NESTABLE):
        blocks = [stmt.body]
    elif type(stmt) in match.blocks:
        blocks = _blocks(stmt)
    else:
        return None
    pieces: list[Piece] = []
    header = a
    for number, block in enumerate(blocks):
        first = block[0]
        start = _stmt_start(first)
        end = b if number == len(blocks) - 1 else (block[-1].end_lineno or block[-1].lineno) + 1
        if start <= max(header, stmt.lineno) or not _opens_line(lines, first) or match.wants(header, start):
            return None  # `if x: y`, or a header needs a rule: parse the whole statement
        line = lines[first.lineno - 1]
        inner_indent = line[:len(line) - len(line.lstrip(" \t"))]
        if not inner_indent.startswith(indent) or len(inner_indent) <= len(indent):
            return None
        pieces.append(Piece(header, start, indent, False))
        pieces += plan_pieces(lines, block, start, end, inner_indent, match)
        header = end
    return pieces


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement, in the order they are written; the arms of
    an `elif` chain are blocks of the first `if`."""
    if isinstance(stmt, ast.If):
        blocks = [stmt.body]
        while len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If) \
                and stmt.orelse[0].col_offset == stmt.col_offset:  # `elif`, not `else:` + `if`
            stmt = stmt.orelse[0]
            blocks.append(stmt.body)
        return blocks + ([stmt.orelse] if stmt.orelse else [])
    if isinstance(stmt, (ast.Try, ast.TryStar)):
        return [stmt.body, *(handler.body for handler in stmt.handlers), *(
            block for block in (stmt.orelse, stmt.finalbody) if block)]
    orelse = getattr(stmt, "orelse", None)
    return [stmt.body] + ([orelse] if orelse else [])  # type: ignore[attr-defined]


def _opens_line(lines: list[str], stmt: ast.stmt) -> bool:
    """Whether `stmt` (its first decorator, if any) is the first thing on its line: not
    `else: x = 1`."""
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        return lines[decorators[0].lineno - 1][:decorators[0].col_offset].strip(" \t\f") == "@"
    return _starts_line(lines, stmt)


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


def _starts_line(lines: list[str], node: ast.expr | ast.stmt) -> bool:
    """Only blanks before `node` on its first line (`col_offset` counts UTF-8 bytes: any other
    character before it makes the slice hold more than blanks, so the answer stays no)."""
    return not lines[node.lineno - 1][:node.col_offset].strip(" \t\f")


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

"""`ast` node helpers, one spelling for every layer (their LibCST twins are in
`codemods.model.cstnodes`): statements of a body, dotted names, qualified names through a
file's import aliases, the name a call calls, the names an assignment binds."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator, Mapping, Sequence

_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def child_nodes(node: ast.AST, fields: Sequence[str] | None = None) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in its order, without its two nested generators
    (the whole-file walks of the engine call it for every node of every file); `fields`: only
    those of the node's fields."""
    found: list[ast.AST] = []
    for name in node._fields if fields is None else fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found += [item for item in value if isinstance(item, ast.AST)]
    return found


# Fields that never hold a node a whole-tree walk wants: names and flags are plain values, and
# `ctx`/`op`/`ops` hold the Load/Store/Add/... singletons, the same object in every node (a
# third of a tree's nodes)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "asname", "module", "level", "kind",
                          "type_comment", "is_async", "conversion", "simple", "tag"})
_WALKED_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {ast.Constant: ()}


def walked_fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a node type that can hold a node of the tree (see `_LEAF_FIELDS`)."""
    fields = _WALKED_FIELDS.get(kind)
    if fields is None:
        fields = _WALKED_FIELDS[kind] = tuple(name for name in kind._fields if name not in _LEAF_FIELDS)
    return fields


def tree_children(node: ast.AST) -> list[ast.AST]:
    """`child_nodes(node)` without the contexts and operators, in its order."""
    return child_nodes(node, walked_fields(type(node)))


def iter_statements(statements: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones included, without walking into expressions."""
    stack = list(reversed(statements))
    while stack:
        node = stack.pop()
        yield node
        for name in _BODIES:
            children = getattr(node, name, None)
            if children:
                stack.extend(reversed(children))


def ast_dotted_parts(node: ast.AST) -> list[str] | None:
    """The `ast` twin of `base.dotted_parts`: `a.b.c` -> ['a', 'b', 'c'], else None."""
    parts = []
    while type(node) is ast.Attribute:  # `type() is`: this runs on every name analyze sees
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def bound_names(target: ast.expr) -> list[str]:
    """Names an assignment target binds: `a`, `a, (b, *c)`; not the base of `a.b` or `a[i]`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in bound_names(element)]
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    return []


def qualified_name(node: ast.expr, aliases: Mapping[str, str]) -> str | None:
    """`th.cuda.x` -> `torch.cuda.x` through the file's import aliases; None for a chain whose
    head is not an imported name (or for anything but a chain of names)."""
    parts = ast_dotted_parts(node)
    if not parts or parts[0] not in aliases:
        return None
    return ".".join([aliases[parts[0]], *parts[1:]])


def call_name(func: ast.expr) -> str:
    """The last name of what a call calls: `f` of `f(x)` and of `a.b.f(x)`; "" for anything else."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def parse_or_none(source: str | bytes) -> ast.Module | None:
    """The `ast` tree of `source`, or None when it does not parse (a syntax error, a null byte,
    nesting too deep or too large for the interpreter); warnings about the code are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


# a string literal at least this long in the source is text (a docstring, a help text, a table)
LONG_STRING = 80

Span = tuple[int, int, int, int]  # first line, first column, last line, end column (1-based lines, character columns)


def _column(line: str, byte_offset: int) -> int:
    """`ast`'s column (a UTF-8 byte offset) as a character offset into `line`."""
    return byte_offset if line.isascii() else len(line.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))


def _span(node: ast.AST, lines: Sequence[str]) -> Span | None:
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    if first is None or last is None or end_col is None or last > len(lines):
        return None
    return first, _column(lines[first - 1], node.col_offset), last, _column(lines[last - 1], end_col)  # type: ignore[attr-defined]


def _size(span: Span, lines: Sequence[str]) -> int:
    first, start, last, end = span
    if first == last:
        return end - start
    return len(lines[first - 1]) - start + end + sum(len(lines[i]) for i in range(first, last - 1))


def literal_spans(constants: Sequence[ast.AST], fstrings: Sequence[ast.AST], lines: Sequence[str]
                  ) -> tuple[list[Span], list[Span]]:
    """Where the string literals sit in the source: (every literal, f-strings included; the plain
    ones, bytes too, at least `LONG_STRING` characters long). The literal parts of f-strings are not
    plain literals."""
    inside_fstrings = {id(value) for fstring in fstrings for value in getattr(fstring, "values", ())}
    every: list[Span] = []
    long: list[Span] = []
    for node in constants:
        if not isinstance(node, ast.Constant) or not isinstance(node.value, (str, bytes)) \
                or id(node) in inside_fstrings or (span := _span(node, lines)) is None:
            continue
        every.append(span)
        if _size(span, lines) >= LONG_STRING:
            long.append(span)
    every += [span for node in fstrings if (span := _span(node, lines)) is not None]
    return every, long


def comment_spans(lines: Sequence[str], literals: Sequence[Span]) -> list[Span]:
    """Where the comments are: from a `#` outside every string literal to the end of its line."""
    inside: dict[int, list[tuple[int, int]]] = {}
    for first, start, last, end in literals:
        for number in range(first, last + 1):
            inside.setdefault(number, []).append((start if number == first else 0,
                                                  end if number == last else len(lines[number - 1])))
    spans = []
    for number, line in enumerate(lines, 1):
        at = line.find("#")
        while at != -1 and any(a <= at < b for a, b in inside.get(number, ())):
            at = line.find("#", at + 1)
        if at != -1:
            spans.append((number, at, number, len(line.rstrip("\r\n"))))
    return spans


def blank_spans(lines: Sequence[str], spans: Sequence[Span]) -> list[str]:
    """`lines` with every character of `spans` but line ends turned into a space: the same lines,
    each as long as before."""
    out = list(lines)
    for first, start, last, end in spans:
        for number in range(first, last + 1):
            line = out[number - 1]
            body = line.rstrip("\r\n")
            a = start if number == first else 0
            b = end if number == last else len(body)
            out[number - 1] = line[:a] + " " * (min(b, len(body)) - a) + line[min(b, len(body)):]
    return out

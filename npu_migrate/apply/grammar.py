"""Parsing independent of the running interpreter. LibCST parses with its own grammar (up to
Python 3.14 in LibCST 1.9), whatever Python runs the tool; `ast` only knows the running
interpreter's grammar, so on Python 3.11 it refuses PEP 695 generics (`def f[T]`, `type X = ...`)
and PEP 701 f-strings (`f"{"a"}"`). The engine needs `ast` only for facts and for where the
top-level statements start; for such a file those statements are stood in for by placeholders
of the same line span, and LibCST parses the real text."""

from __future__ import annotations

import ast
import warnings

import libcst as cst

# the newest grammar this LibCST knows (its parser is version-independent in practice, but
# stating it keeps the choice explicit and independent of sys.version_info)
NEWEST = "3.14"
CONFIG = cst.PartialParserConfig(python_version=NEWEST)


def parse_module(source: str) -> cst.Module:
    return cst.parse_module(source, config=CONFIG)


def _parses_with_ast(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
    return True


def _placeholder(chunk: str) -> str:
    """An expression statement spanning exactly the lines of `chunk`."""
    lines = chunk.count("\n") + (not chunk.endswith("\n"))
    tail = "\n" if chunk.endswith("\n") else ""
    return ("0" if lines == 1 else "(0" + "\n" * (lines - 1) + ")") + tail


# what `ast` says of code beyond a limit of CPython's tokenizer (200 nested brackets, 100
# indentation levels), which no version raises: such a file is not newer syntax, whatever LibCST says
CPYTHON_LIMITS = ("too many nested parentheses", "too many levels of indentation")


def beyond_cpython_limits(error: SyntaxError) -> bool:
    return any(limit in (error.msg or "") for limit in CPYTHON_LIMITS)


def ast_of_newer_syntax(text: str, error: SyntaxError | None = None) -> ast.Module | None:
    """An `ast` tree with the top-level statements of `text` at their real lines, for a file
    that this interpreter's `ast` refuses (with `error`) but LibCST parses; None when LibCST refuses
    it too, or when `error` is a limit that no CPython lifts."""
    if error is not None and beyond_cpython_limits(error):
        return None
    try:
        module = parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    chunks = [module.code_for_node(statement) for statement in module.body]
    footer = "".join(module.code_for_node(line) for line in module.footer)
    header = text[:len(text) - len("".join(chunks)) - len(footer)]
    if header + "".join(chunks) + footer != text:
        return None  # LibCST's pieces do not add up to the file: do not guess
    stand_in = header + "".join(c if _parses_with_ast(c) else _placeholder(c) for c in chunks) + footer
    try:
        return ast.parse(stand_in)
    except (SyntaxError, ValueError):
        return None


def is_valid_python(text: str) -> bool:
    """Whether `text` parses: by `ast` when this interpreter can, else by LibCST's grammar."""
    if _parses_with_ast(text):
        return True
    try:
        parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return False
    return True

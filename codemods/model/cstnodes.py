"""LibCST node helpers, one spelling for every layer: dotted names, source text of a node, string
literals, keyword arguments, import aliases, splitting a `from` import and binding a call's
arguments to parameter names, and the children of a node in LibCST's visiting order without
rebuilding it (`children_of`). Pure functions of the tree; their `ast` twins are in
`codemods.model.astnodes`."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator, Sequence
from typing import TypeVar

import libcst as cst

Node = TypeVar("Node", bound=cst.CSTNode)

_EMPTY_MODULE = cst.Module([])
# `name=value` with no spaces around `=`, as PEP 8 writes keyword arguments
KEYWORD_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                whitespace_after=cst.SimpleWhitespace(""))


_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def child_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of a node type that hold its children, in the order LibCST visits them (the
    order of the source text). LibCST's own traversal rebuilds every node it passes, which is most
    of its cost; reading the children field by field costs a quarter of it. The order is read
    once per type from the type's `_visit_and_replace_children`, whose `visit_*(self, "field",
    ...)` calls are that order: the dataclass order differs (`FunctionDef` declares `body` before
    `decorators`)."""
    fields = _FIELDS.get(kind)
    if fields is None:
        owner = next(c for c in kind.__mro__ if "_visit_and_replace_children" in vars(c))
        tree = ast.parse(textwrap.dedent(inspect.getsource(vars(owner)["_visit_and_replace_children"])))
        named = sorted((node.lineno, node.col_offset, field.value) for node in ast.walk(tree)
                       if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                       and node.func.id.startswith("visit_") and len(node.args) > 1
                       and isinstance(field := node.args[1], ast.Constant) and isinstance(field.value, str))
        fields = _FIELDS[kind] = tuple(dict.fromkeys(name for _, _, name in named))
    return fields


def children_of(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The direct children of `node`, in source order, as LibCST's visitors meet them."""
    for name in _FIELDS.get(type(node)) or child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from value


def find_all(node: cst.CSTNode, kinds: type[Node] | tuple[type[Node], ...]) -> list[Node]:
    """`node` and every node below it of these kinds, in source order (parents first). What
    `libcst.matchers.findall` finds for a type, without importing the matchers module, which
    costs more than the rest of LibCST, and without rebuilding the tree as a visitor does."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, kinds):
            found.append(current)
        stack.extend(reversed(list(children_of(current))))
    return found


def dotted_parts(node: cst.CSTNode) -> list[str] | None:
    """`a.b.c` -> ['a', 'b', 'c']; None when the chain has anything but names."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    parts.reverse()
    return parts


def imported_chain(node: cst.CSTNode) -> list[str] | None:
    """`__import__("torch").cuda.is_available` -> ['torch', 'cuda', 'is_available']: a chain on
    the builtin `__import__` of a literal module name, which returns the top-level package
    (`__import__("torch.cuda")` is `torch`); None for anything else."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "__import__"
            and len(node.args) == 1 and node.args[0].keyword is None):
        return None
    module = string_value(node.args[0].value)
    if not module or not all(part.isidentifier() for part in module.split(".")):
        return None
    return [module.split(".")[0], *reversed(parts)]


def dotted_name(node: cst.CSTNode | None) -> str | None:
    """`a.b.c` -> "a.b.c" (module names in imports, attribute chains); None otherwise."""
    parts = dotted_parts(node) if node is not None else None
    return ".".join(parts) if parts else None


def dotted_expr(dotted: str) -> cst.Name | cst.Attribute:
    """'torch.npu.synchronize' -> the Attribute chain expression (also a module name of an import)."""
    head, *rest = dotted.split(".")
    expr: cst.Name | cst.Attribute = cst.Name(head)
    for part in rest:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def code_of(node: cst.CSTNode) -> str:
    """The source text of a node (as it would be printed on its own)."""
    return _EMPTY_MODULE.code_for_node(node)


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString) and "b" in node.prefix.lower():
        return None
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def verbatim_string(node: cst.CSTNode) -> str | None:
    """The value of a plain string literal whose source spells it verbatim (no escapes), so a
    text edit of the value is an edit of the source."""
    if not isinstance(node, cst.SimpleString) or "b" in node.prefix.lower() or "\\" in node.value:
        return None
    return node.raw_value


def with_string(node: cst.SimpleString, value: str) -> cst.SimpleString:
    """The same literal (prefix and quotes kept) holding another value without escapes."""
    quote = node.quote
    return node.with_changes(value=f"{node.prefix}{quote}{value}{quote}")


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    """The keyword argument `name=value`."""
    return cst.Arg(value, keyword=cst.Name(name), equal=KEYWORD_EQUAL)


def alias_asname(alias: cst.ImportAlias) -> str | None:
    """`y` of `import x as y` / `from m import x as y`; None without `as`."""
    if alias.asname is None:
        return None
    name = alias.asname.name
    return name.value if isinstance(name, cst.Name) else None


def alias_local(alias: cst.ImportAlias) -> str:
    """The local name an import alias binds (`as` name, else the imported name)."""
    return alias_asname(alias) or dotted_name(alias.name) or ""


def split_import(stmt: cst.ImportFrom, moved: list[cst.ImportAlias], module: cst.BaseExpression,
                 rest: list[cst.ImportAlias]) -> list[cst.ImportFrom] | None:
    """`from M import <rest>; from <module> import <moved>` on the line where `stmt` starts.

    The names that stay come first, on one line, so that both statements start on the same
    line (tools that cut a file at statement starts keep them together); the moved names keep
    the original parentheses, line breaks and comments. None when a name that stays carries a
    comment, which one line could not keep."""
    if any("#" in code_of(alias) for alias in rest):
        return None
    single = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == len(rest) - 1 else
                             cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
              for i, a in enumerate(rest)]
    stay = stmt.with_changes(names=single, lpar=None, rpar=None)
    parenthesized = stmt.lpar is not None
    names = []
    for i, alias in enumerate(moved):
        last = i == len(moved) - 1
        if last and not parenthesized:
            alias = alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif not last and alias.comma is cst.MaybeSentinel.DEFAULT:
            alias = alias.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        names.append(alias)
    return [stay, stmt.with_changes(module=module, names=names)]


def bind(call: cst.Call, parameters: Sequence[str], keywords: Sequence[str] = ()) -> tuple[dict[str, str], str | None]:
    """The code of each argument of `call` by parameter name, or the reason it cannot be read:
    `parameters` may be given by position or keyword, `keywords` only by keyword."""
    if any(a.star for a in call.args):
        return {}, "`*args`/`**kwargs`: the arguments cannot be checked"
    positional = [a for a in call.args if not a.keyword]
    if len(positional) > len(parameters):
        return {}, f"more than {len(parameters)} positional arguments ({', '.join(parameters)}): the later ones cannot be told apart"
    args = {name: code_of(arg.value) for name, arg in zip(parameters, positional)}
    for arg in call.args:
        if arg.keyword:
            if arg.keyword.value not in (*parameters, *keywords):
                return {}, f"`{arg.keyword.value}` is not an argument this rule maps"
            args[arg.keyword.value] = code_of(arg.value)
    return args, None

"""Adding the imports a rewrite needs (`import torch_npu` first of all), at the text level.

`import torch_npu` goes right after the file's first `import torch`; when the first torch import
is something else (`from torch.cuda import ...`, rewritten to `torch.npu`), it goes right before
it, since `torch.npu` exists only once torch_npu is imported. A file without torch imports gets
it after its docstring and `__future__` imports, and so does a file whose first module-level
torch import comes after the first rewritten use (`if using_colab: import torch; torch.npu...`
in an early notebook cell). The import carries `# noqa: F401`: linters
would otherwise call it unused, and `ruff --fix` would delete it and break the port.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from codemods.model.facts import FileFacts

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
Import = tuple[str, "str | None", "str | None"]


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split only where Python itself ends a line."""
    return _LINE.findall(text)


def newline_of(text: str) -> str:
    match = re.search(r"\r\n|\r|\n", text)
    return match.group(0) if match else "\n"


def render_import(item: Import) -> str:
    module, name, asname = item
    if name is None:
        text = f"import {module}" + (f" as {asname}" if asname else "")
    else:
        text = f"from {module} import {name}" + (f" as {asname}" if asname else "")
    return text + ("  # noqa: F401" if item == ("torch_npu", None, None) else "")


def already_imported(facts: FileFacts, item: Import) -> bool:
    module, name, asname = item
    if name is None:
        if module == "torch_npu":  # any import from torch_npu loads the backend
            return any(v == "torch_npu" or v.startswith("torch_npu.") for v in facts.aliases.values())
        local = asname or module.split(".")[0]
        return facts.aliases.get(local) == (module if asname else local)
    return facts.aliases.get(asname or name) == f"{module}.{name}"


def _is_torch_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import):
        return any(a.name == "torch" or a.name.startswith("torch.") for a in stmt.names)
    return (isinstance(stmt, ast.ImportFrom) and stmt.module is not None and not stmt.level
            and (stmt.module == "torch" or stmt.module.startswith("torch.")))


def insertion_line(facts: FileFacts, first_use: int | None = None) -> int:
    """0-based index of the line before which new imports go. `first_use`: the 1-based line of
    the first code that needs them; a module-level torch import below it (the first one being
    inside an `if`, or in a later notebook cell) is too late, and the imports go to the top."""
    for stmt in facts.top_imports:
        if _is_torch_import(stmt):
            plain = isinstance(stmt, ast.Import) and any(a.name == "torch" for a in stmt.names)
            at = (stmt.end_lineno or stmt.lineno) if plain else stmt.lineno - 1
            if first_use is None or at < first_use:
                return at
            break
    if facts.header_end:
        return facts.header_end
    body = facts.tree.body
    return body[0].lineno - 1 if body else 0


_SETTING_NODES = (ast.Assign, ast.AnnAssign, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Dict,
                  ast.List, ast.Tuple, ast.Set, ast.keyword, ast.BinOp, ast.UnaryOp, ast.operator,
                  ast.unaryop, ast.JoinedStr, ast.FormattedValue, ast.Starred)


def is_settings_module(facts: FileFacts) -> bool:
    """A module of module-level assignments of plain values only (literals, names, `dict(...)`;
    no import, no other call, no attribute), such as an mmcv / mmdet / mmengine config file:
    the framework loads it and turns every module-level name into a setting, so an import added
    there would become a setting too (a module object that mmcv's `Config` can neither copy nor
    dump, and a duplicate key across `_base_` files)."""
    body = facts.tree.body
    if not body or not all(isinstance(stmt, (ast.Assign, ast.AnnAssign)) for stmt in body):
        return False
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id == "dict"):
                    return False
            elif not isinstance(node, _SETTING_NODES):
                return False
    return True


def insert_imports(text: str, facts: FileFacts, wanted: Sequence[Import],
                   first_use: int | None = None) -> tuple[str, list[str], int]:
    """Insert the missing imports of `wanted` above `first_use` (see `insertion_line`); return
    the new text, the lines added and the 1-based line of the first one.
    Line numbers in `facts` refer to `text` before any rewrite: rewrites never add or remove
    lines above an import statement, so they still hold."""
    missing = [item for item in wanted if not already_imported(facts, item)]
    if not missing:
        return text, [], 0
    lines = split_lines(text)
    at = min(insertion_line(facts, first_use), len(lines))
    newline = newline_of(text)
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    added = [render_import(item) for item in missing]
    lines[at:at] = [line + newline for line in added]
    return "".join(lines), added, at + 1

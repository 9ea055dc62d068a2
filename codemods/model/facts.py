"""File-level facts computed once from Python's `ast` (ten times cheaper than LibCST):
import aliases, module-level constants and where imports live. Rules see them through
`RuleContext`, whichever chunk of the file they are looking at."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from codemods.model.astnodes import bound_names, iter_statements

_AMBIGUOUS = "\0ambiguous"


@dataclass
class FileFacts:
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)
    constants: dict[str, object] = field(default_factory=dict)
    top_imports: list[ast.stmt] = field(default_factory=list)  # module-level import statements
    header_end: int = 0  # last line of the docstring / __future__ imports (insertion floor)

    @classmethod
    def from_tree(cls, tree: ast.Module) -> FileFacts:
        facts = cls(tree)
        bound: dict[str, str] = {}
        assigned: set[str] = set()
        counts: dict[str, int] = {}  # name -> how many assignments bind it, anywhere
        for stmt in iter_statements(tree.body):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    local = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else local
                    _bind(bound, local, target)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    if alias.name != "*":
                        _bind(bound, alias.asname or alias.name, f"{stmt.module}.{alias.name}")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assigned.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for assigned_to in targets:
                    for name in bound_names(assigned_to):
                        assigned.add(name)
                        counts[name] = counts.get(name, 0) + 1
        facts.aliases = {k: v for k, v in bound.items() if v != _AMBIGUOUS and k not in assigned}
        facts.constants = _module_constants(tree, counts)
        facts.top_imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        facts.header_end = _header_end(tree)
        return facts

    def qualify(self, parts: Sequence[str]) -> str | None:
        target = self.aliases.get(parts[0])
        if target is None:
            return None
        return ".".join([target, *parts[1:]])

    def imports_module(self, module: str) -> bool:
        """Whether `import module` (any alias) appears at module level."""
        return any(isinstance(s, ast.Import) and any(a.name == module for a in s.names)
                   for s in self.top_imports)


def _bind(bound: dict[str, str], local: str, target: str) -> None:
    previous = bound.get(local)
    bound[local] = target if previous in (None, target) else _AMBIGUOUS


def _module_constants(tree: ast.Module, counts: dict[str, int]) -> dict[str, object]:
    """Names assigned exactly once at module level, to a literal, and never reassigned anywhere
    (`counts`: how many assignments of the file bind each name)."""
    values: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if isinstance(stmt.value, ast.Constant):
                values[stmt.targets[0].id] = stmt.value.value
    return {name: value for name, value in values.items() if counts.get(name) == 1}


def _header_end(tree: ast.Module) -> int:
    end = 0
    for stmt in tree.body:
        is_doc = (stmt is tree.body[0] and isinstance(stmt, ast.Expr)
                  and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str))
        is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (is_doc or is_future):
            break
        end = stmt.end_lineno or stmt.lineno
    return end

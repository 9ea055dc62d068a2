"""Import aliases for the analyzer, from the engine's FileFacts.

Workaround, to drop once codemods/facts.py is fixed: FileFacts counts a name as rebound when it
appears anywhere inside an assignment target, so `torch.backends.cudnn.benchmark = True` (an
attribute store) makes `torch` unresolvable for the whole file. Here only names that are really
rebound (plain-name targets, defs, classes) cancel an import alias."""

from __future__ import annotations

import ast
import dataclasses

from npu_migrate_codemods.facts import FileFacts, iter_statements


def _stored_names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_stored_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _stored_names(target.value)
    return set()  # attribute and subscript stores rebind nothing


def analyzer_facts(tree: ast.Module) -> FileFacts:
    facts = FileFacts.from_tree(tree)
    bound: dict[str, set[str]] = {}
    rebound: set[str] = set()
    for stmt in iter_statements(tree.body):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                bound.setdefault(local, set()).add(alias.name if alias.asname else local)
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for alias in stmt.names:
                if alias.name != "*":
                    bound.setdefault(alias.asname or alias.name, set()).add(f"{stmt.module}.{alias.name}")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            rebound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                rebound |= _stored_names(target)
    missing = {name: next(iter(targets)) for name, targets in bound.items()
               if name not in facts.aliases and len(targets) == 1 and name not in rebound}
    if not missing:
        return facts
    return dataclasses.replace(facts, aliases={**facts.aliases, **missing})

"""NPU101: `.cuda(...)` -> `.npu(...)`; NPU102: `.is_cuda` -> `.is_npu`.

Both are attribute renames on any receiver (tensors, modules, storages), with two exceptions
that would change meaning: a receiver that is an imported *module* (`torch.cuda(...)`,
`tvm.cuda(0)`: module functions, not tensor methods), and a file that defines its own `cuda`
/ `is_cuda` (a method of the user's class: renaming only the calls would break it). The latter
is reported, not rewritten.
"""

from __future__ import annotations

import ast

import libcst as cst

from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.astnodes import iter_statements
from npu_migrate.core.diagnostics import Severity


def _file_facts(tree: ast.Module) -> tuple[frozenset[str], dict[str, int]]:
    """(local names bound to modules by `import X [as Y]`, {defined method/attribute: line})
    for the names this module cares about."""
    modules: set[str] = set()
    defined: dict[str, int] = {}
    for stmt in iter_statements(tree.body):
        if isinstance(stmt, ast.Import):
            modules.update(a.asname or a.name.split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in _OWN:
            defined.setdefault(stmt.name, stmt.lineno)
        elif isinstance(stmt, ast.ClassDef):
            for item in stmt.body:  # `is_cuda = property(...)`, `cuda = _cuda`
                targets = item.targets if isinstance(item, ast.Assign) else (
                    [item.target] if isinstance(item, ast.AnnAssign) else [])
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in _OWN:
                        defined.setdefault(target.id, item.lineno)
    return frozenset(modules), defined


_OWN = ("cuda", "is_cuda")


class RenameRule(Rule):
    fix = Fix.SAFE
    needs_torch_npu = True
    severity = Severity.WARNING

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._facts: tuple[frozenset[str], dict[str, int]] | None = None

    @property
    def file_facts(self) -> tuple[frozenset[str], dict[str, int]]:
        if self._facts is None:
            self._facts = _file_facts(self.context.facts.tree)
        return self._facts

    def defined_here(self, name: str, node: cst.CSTNode) -> bool:
        """Report instead of rewriting when the file defines its own `name`."""
        line = self.file_facts[1].get(name)
        if line is None:
            return False
        new = {"cuda": "npu", "is_cuda": "is_npu"}[name]
        self.report(node, f"this file defines its own `{name}` (line {line}), so `.{name}` may be "
                          f"the user's own: rename both to `{new}` by hand, or keep CUDA")
        return True


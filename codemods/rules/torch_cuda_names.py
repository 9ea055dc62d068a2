"""NPU501-NPU503: `torch.cuda` as a name and as a value.

NPU501: `from torch import cuda` becomes `from torch import npu`, and every `cuda.<name>` of
the file becomes `npu.<name>` -- never `from torch import npu as cuda`, which keeps a lie in the
name. It acts where NPU120 repointed the import (every use is a name torch.npu has) and `npu`
is free in the file.

NPU502: the `torch.cuda` module used as a value: `getattr(torch.cuda, "name")`,
`hasattr(torch.cuda, "name")` become `torch.npu` when the name is one torch.npu provides; with
a computed name (`getattr(torch.cuda, name)`) nothing is provable and it is reported.

NPU503: `torch.cuda.OutOfMemoryError` (in `except`, `isinstance`, ...) becomes
`torch.OutOfMemoryError`, the same class (torch >= 2.5), which NPU out-of-memory errors raise too.
"""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from codemods.framework.base import Fix, Rule, dotted_name
from codemods.framework.families.torch_cuda_api import PREFILTER, alias_uses, cuda_names
from npu_migrate.core.diagnostics import Severity

_INTROSPECTION = frozenset({"getattr", "hasattr"})


def _binds(tree: ast.Module, name: str) -> bool:
    """Whether the file binds `name` anywhere (assignment, import, parameter, def)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
    return False


class CudaModuleName(Rule):
    code = "NPU501"
    name = "cuda-module-name"
    summary = "`from torch import cuda` becomes `from torch import npu` and `cuda.X` uses become `npu.X`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = PREFILTER  # NPU120's: the same pattern is searched once per file

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._ready: bool | None = None

    @property
    def ready(self) -> bool:
        """`cuda` is `from torch import cuda`, every use is `cuda.<name torch.npu has>` (so
        NPU120 repoints the import), and nothing else in the file is called `npu`."""
        if self._ready is None:
            facts = self.context.facts
            tree = facts.tree
            plain = any(isinstance(s, ast.ImportFrom) and s.module == "torch" and not s.level
                        and any(a.name == "cuda" and a.asname is None for a in s.names)
                        for s in ast.walk(tree))
            use = alias_uses(tree, "cuda")
            self._ready = (plain and facts.aliases.get("cuda") == "torch.cuda" and bool(use.attrs)
                           and not use.blockers(cuda_names().rewrites) and not _binds(tree, "npu"))
        return self._ready

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> Any:
        """Runs after NPU120 (a higher code): NPU120 wrote `npu as cuda`, this drops the alias."""
        if isinstance(updated_node.names, cst.ImportStar) or isinstance(original_node.names, cst.ImportStar) \
                or len(original_node.names) != len(updated_node.names) \
                or not any(dotted_name(a.name) == "cuda" for a in original_node.names) or not self.ready:
            return updated_node
        names, changed = [], False
        for before, alias in zip(original_node.names, updated_node.names):
            asname = alias.asname
            if (dotted_name(before.name) == "cuda" and before.asname is None and dotted_name(alias.name) == "npu"
                    and asname is not None and isinstance(asname.name, cst.Name) and asname.name.value == "cuda"):
                alias = alias.with_changes(asname=None)
                changed = True
            names.append(alias)
        if not changed:
            return updated_node
        self.fixed(original_node, "`from torch import cuda` → `from torch import npu` (uses renamed to `npu.`)")
        return updated_node.with_changes(names=names)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        value = updated_node.value
        if (self.context.in_import or not isinstance(value, cst.Name) or value.value != "cuda"
                or not self.ready):
            return updated_node
        self.fixed(original_node, f"`cuda.{updated_node.attr.value}` → `npu.{updated_node.attr.value}`")
        return updated_node.with_changes(value=value.with_changes(value="npu"))


class TorchCudaAsValue(Rule):
    code = "NPU502"
    name = "torch-cuda-as-value"
    summary = "`getattr(torch.cuda, \"name\")` / `hasattr(...)` use `torch.npu`; a computed name is reported"
    fix = Fix.SAFE
    needs_torch_npu = True
    severity = Severity.WARNING
    prefilter = r"attr\(\s*[\w.]*\bcuda\s*,"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        func = original_node.func
        if not (isinstance(func, cst.Name) and func.value in _INTROSPECTION and len(original_node.args) >= 2):
            return updated_node
        owner = original_node.args[0].value
        if self.resolve(owner) != "torch.cuda" or not isinstance(owner, cst.Attribute):
            return updated_node
        attribute = original_node.args[1].value
        name = attribute.evaluated_value if isinstance(attribute, cst.SimpleString) else None
        rewrites = cuda_names().rewrites
        if not isinstance(name, str):
            self.report(original_node, f"`{func.value}(torch.cuda, <computed name>)`: torch.npu has most "
                                       "torch.cuda names; use torch.npu if every name it can look up exists there")
            return updated_node
        if rewrites.get(name) != name:
            return updated_node  # NPU121 / the final sweep speak about names torch.npu lacks
        new_owner = updated_node.args[0].value
        assert isinstance(new_owner, cst.Attribute)
        self.fixed(original_node, f"`{func.value}(torch.cuda, {name!r})` → `{func.value}(torch.npu, {name!r})`")
        first = updated_node.args[0].with_changes(value=new_owner.with_changes(attr=cst.Name("npu")))
        return updated_node.with_changes(args=[first, *updated_node.args[1:]])


class CudaOutOfMemory(Rule):
    code = "NPU503"
    name = "cuda-out-of-memory-error"
    summary = "`torch.cuda.OutOfMemoryError` becomes the device-neutral `torch.OutOfMemoryError` (the same class)"
    fix = Fix.SAFE
    prefilter = r"OutOfMemoryError"

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        if (self.context.in_import or original_node.attr.value != "OutOfMemoryError"
                or self.resolve(original_node) != "torch.cuda.OutOfMemoryError"):
            return updated_node
        owner = updated_node.value
        if not isinstance(owner, cst.Attribute):
            return updated_node  # `cuda.OutOfMemoryError` through a module alias: left to the sweep
        self.fixed(original_node, "`torch.cuda.OutOfMemoryError` → `torch.OutOfMemoryError` (the same class)")
        return updated_node.with_changes(value=owner.value)

"""NPU501: the cuda-module-name rule."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.families.torch_cuda_api import PREFILTER, alias_uses, cuda_names
from codemods.model.cstnodes import dotted_name


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
    """## What it does

    `from torch import cuda` becomes `from torch import npu`, and its `cuda.X` uses become `npu.X`.

    ## Why

    NPU120 repoints a `torch.cuda` module alias at `torch.npu` when every use is a name torch.npu has; for `from torch import cuda` that gave `from torch import npu as cuda`, a lie in the name. This drops the alias and renames the uses, when nothing else in the file is called `npu`.

    ## Example

    ```python
    # before
    from torch import cuda
    cuda.synchronize()
    # after
    from torch import npu
    npu.synchronize()
    ```

    ## Fix safety

    Safe: the same module under its own name.
    Suppress with `# npu-migrate: ignore[NPU501]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU501"
    prefilter_in_code = True
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
                        for s in self.context.model.of_type(ast.ImportFrom))
            use = alias_uses(self.context.model, "cuda")
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


CASES = [
    Invalid(
        """\
from torch import cuda
cuda.synchronize()
""",
        after="""\
from torch import npu
npu.synchronize()
""",
        codes=("NPU120", "NPU501"),
        with_rules=("NPU120",),
    ),
    Valid(
        """\
from torch import npu
npu.synchronize()
""",
    ),
    Invalid(
        """\
from torch import cuda
def f():
    cuda.synchronize()
    return cuda.device_count()
""",
        after="""\
from torch import npu
def f():
    npu.synchronize()
    return npu.device_count()
""",
        codes=('NPU120', 'NPU501'),
        with_rules=('NPU120',),
    ),
]

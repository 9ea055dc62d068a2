"""NPU502: the torch-cuda-as-value rule."""

from __future__ import annotations

from typing import Any
import libcst as cst
from codemods.framework.base import Fix, Rule
from codemods.framework.families.torch_cuda_api import cuda_names
from npu_migrate.core.diagnostics import Severity

from codemods.framework.cases import Invalid, Valid


_INTROSPECTION = frozenset({"getattr", "hasattr"})

class TorchCudaAsValue(Rule):
    """## What it does

    `getattr(torch.cuda, "name")` and `hasattr(torch.cuda, "name")` use `torch.npu`; a computed name is reported.

    ## Why

    The `torch.cuda` module used as a value escapes the attribute rules. With a literal name torch.npu provides, the owner becomes `torch.npu`; with a computed name nothing is provable.

    ## Example

    ```python
    # before
    f = getattr(torch.cuda, "synchronize")
    # after
    f = getattr(torch.npu, "synchronize")
    ```

    ## Fix safety

    Safe: the same name looked up on the NPU module.
    Suppress with `# npu-migrate: ignore[NPU502]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

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


CASES = [
    Invalid(
        """\
import torch
f = getattr(torch.cuda, "synchronize")
""",
        after="""\
import torch
f = getattr(torch.npu, "synchronize")
""",
    ),
    Invalid(
        """\
import torch
def f(name):
    return getattr(torch.cuda, name)
""",
        codes=("NPU502",),
    ),
    Valid(
        """\
import torch
f = getattr(torch.nn, "Linear")
""",
    ),
]

"""NPU502: the torch-cuda-as-value rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.api.targets import too_old, version_allows
from codemods.families.torch_cuda_api import cuda_names, excluded_names, npu_names
from codemods.model.cstnodes import dotted_expr, with_string
from npu_migrate.core.diagnostics import Severity

_INTROSPECTION = frozenset({"getattr", "hasattr"})

class TorchCudaAsValue(Rule):
    """## What it does

    `getattr(torch.cuda, "name")` and `hasattr(torch.cuda, "name")` use `torch.npu` (under its NPU name: `"CUDAGraph"` becomes `"NPUGraph"`); a name torch.npu lacks is reported with what to use instead, and so is a computed name.

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
    - **portable**: `getattr(torch.cuda, name)` / `hasattr(...)` look the name up on `torch.get_device_module()`, the run's device module (torch.cuda, torch.npu, or torch.cpu without an accelerator), computed names included (torch >= 2.3, else reported)
    """

    code = "NPU502"
    supported_targets = frozenset({"npu", "portable"})
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
        if self.target == "portable":
            return self._portable(original_node, updated_node, func.value)
        if not isinstance(name, str):
            self.report(original_node, f"`{func.value}(torch.cuda, <computed name>)`: torch.npu has most "
                                       "torch.cuda names; use torch.npu if every name it can look up exists there")
            return updated_node
        npu_name = rewrites.get(name) or (name if name in npu_names() else None)
        if npu_name is None:
            flags = cuda_names().flags
            advice = flags.get(name) or excluded_names().get(name) or "torch.npu has no such name"
            self.report(original_node, f"`{func.value}(torch.cuda, {name!r})`: {advice}")
            return updated_node
        new_owner = updated_node.args[0].value
        assert isinstance(new_owner, cst.Attribute)
        self.fixed(original_node, f"`{func.value}(torch.cuda, {name!r})` → `{func.value}(torch.npu, {npu_name!r})`")
        first = updated_node.args[0].with_changes(value=new_owner.with_changes(attr=cst.Name("npu")))
        rest = list(updated_node.args[1:])
        if npu_name != name:
            rest[0] = rest[0].with_changes(value=with_string(attribute, npu_name))  # type: ignore[arg-type]
        return updated_node.with_changes(args=[first, *rest])


    def _portable(self, original: cst.Call, updated: cst.Call, function: str) -> Any:
        """`getattr(torch.cuda, name)` -> `getattr(torch.get_device_module(), name)`: the run's
        device module (torch.cuda, torch.npu, or torch.cpu without an accelerator), so a computed
        name works too."""
        if not version_allows(self.context.options, "torch.get_device_module"):
            self.report(original, f"`{function}(torch.cuda, ...)`: " + too_old(self.context.options, "torch.get_device_module"))
            return updated
        module = cst.Call(func=dotted_expr(f"{self.local_torch()}.get_device_module"))
        self.fixed(original, f"`{function}(torch.cuda, ...)` → `{function}(torch.get_device_module(), ...)`")
        return updated.with_changes(args=[updated.args[0].with_changes(value=module), *updated.args[1:]])

    def local_torch(self) -> str:
        return next((local for local, bound in self.context.facts.aliases.items() if bound == "torch"), "torch")


CASES = [
    Invalid(
        """\
import torch
f = getattr(torch.cuda, "synchronize")
ok = hasattr(torch.cuda, name)
""",
        after="""\
import torch
f = getattr(torch.get_device_module(), "synchronize")
ok = hasattr(torch.get_device_module(), name)
""",
        options=(("target", "portable"),),
    ),
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
    Invalid(
        """\
import torch
f = getattr(torch.cuda, 'synchronize')
""",
        after="""\
import torch
f = getattr(torch.npu, 'synchronize')
""",
    ),
    Invalid(
        """\
import torch
ok = hasattr(torch.cuda, 'is_bf16_supported')
""",
        after="""\
import torch
ok = hasattr(torch.npu, 'is_bf16_supported')
""",
    ),
]

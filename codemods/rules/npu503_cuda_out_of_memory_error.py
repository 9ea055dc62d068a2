"""NPU503: the cuda-out-of-memory-error rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.api.targets import too_old, version_allows


class CudaOutOfMemory(Rule):
    """## What it does

    `torch.cuda.OutOfMemoryError` becomes `torch.OutOfMemoryError`.

    ## Why

    `torch.cuda.OutOfMemoryError` is `torch.OutOfMemoryError` (torch >= 2.5): the device-neutral name catches the same exception and does not depend on `torch.cuda`.

    ## Example

    ```python
    # before
    try:
        step()
    except torch.cuda.OutOfMemoryError:
        pass
    # after
    try:
        step()
    except torch.OutOfMemoryError:
        pass
    ```

    ## Fix safety

    Safe: the same class.
    Suppress with `# npu-migrate: ignore[NPU503]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the same rewrite (`torch.OutOfMemoryError` is device-generic); both targets keep `torch.cuda.OutOfMemoryError` and report it below torch 2.5 (target-version)
    """

    code = "NPU503"
    supported_targets = frozenset({"npu", "portable"})
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
        if not version_allows(self.context.options, "torch.OutOfMemoryError"):
            self.report(original_node, too_old(self.context.options, "torch.OutOfMemoryError") + ": kept")
            return updated_node
        self.fixed(original_node, "`torch.cuda.OutOfMemoryError` → `torch.OutOfMemoryError` (the same class)")
        return updated_node.with_changes(value=owner.value)


CASES = [
    Invalid(  # torch 2.4 has no torch.OutOfMemoryError: kept and reported (either target)
        """\
import torch
try:
    step()
except torch.cuda.OutOfMemoryError:
    pass
""",
        options=(("target_version", "2.4"),),
    ),
    Invalid(
        """\
import torch
try:
    pass
except torch.cuda.OutOfMemoryError:
    pass
""",
        after="""\
import torch
try:
    pass
except torch.OutOfMemoryError:
    pass
""",
    ),
    Valid(
        """\
import torch
try:
    pass
except torch.OutOfMemoryError:
    pass
""",
    ),
    Invalid(
        """\
import torch
def f(e):
    return isinstance(e, (torch.cuda.OutOfMemoryError, RuntimeError))
""",
        after="""\
import torch
def f(e):
    return isinstance(e, (torch.OutOfMemoryError, RuntimeError))
""",
    ),
]

"""NPU101: the cuda-method rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.cases import Invalid, Valid
from codemods.framework.families.cuda_method import RenameRule


class CudaMethod(RenameRule):
    """## What it does

    `.cuda(...)` on tensors and modules becomes `.npu(...)`, arguments kept

    ## Why

    torch_npu registers the NPU as PrivateUse1 named `npu` and generates `Tensor.npu()`,
    `Module.npu()` and the storage methods with the same signature as `.cuda()` (`device`,
    `non_blocking`). `transfer_to_npu` aliases `Tensor.cuda = Tensor.npu` at run time; a static
    rename does the same without the monkey patch, so the code says what it does.

    Two receivers are left alone: an imported module (`torch.cuda(...)`, `tvm.cuda(0)` are module
    functions, not tensor methods) and any receiver in a file that defines its own `cuda` method or
    attribute. In the second case renaming only the calls would bypass the user's method, so each
    call is reported instead.

    ## Example

    ```python
    # before
    model = Net().cuda()
    x = batch.cuda(non_blocking=True)
    # after
    model = Net().npu()
    x = batch.npu(non_blocking=True)
    ```

    Reported, not rewritten:

    ```python
    class Wrapper:
        def cuda(self):          # the file defines its own cuda()
            ...
    w = Wrapper().cuda()         # NPU101: rename both to npu() by hand, or keep CUDA
    ```

    ## Fix safety

    Safe: same method, same arguments, same result type. A device string passed to it
    (`x.cuda("cuda:1")`) is rewritten by NPU103. Suppress with `# npu-migrate: ignore[NPU101]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU101"
    name = "cuda-method"
    summary = "`.cuda(...)` on tensors and modules becomes `.npu(...)`, arguments kept"
    prefilter = r"\.cuda\b"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
            return updated_node
        receiver = original_node.func.value  # type: ignore[attr-defined]
        # `torch.cuda(...)`, `tvm.cuda(0)`: a module's function, not a tensor or module method
        if isinstance(receiver, cst.Name) and receiver.value in self.file_facts[0]:
            return updated_node
        if self.resolve(original_node.func) == "torch.cuda":
            return updated_node
        if self.defined_here("cuda", original_node):
            return updated_node
        self.fixed(original_node, "`.cuda()` → `.npu()`")
        return updated_node.with_changes(func=func.with_changes(attr=cst.Name("npu")))


CASES = [
    Invalid(
        """\
import os
import torch
model = Net().cuda()
x = batch.cuda(non_blocking=True)
""",
        after="""\
import os
import torch
model = Net().npu()
x = batch.npu(non_blocking=True)
""",
    ),
    Valid(
        """\
import os
import torch
model = Net().npu()
x = batch.npu(non_blocking=True)
""",
    ),
]

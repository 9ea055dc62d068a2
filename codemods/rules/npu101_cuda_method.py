"""NPU101: the cuda-method rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.portable import (
    generic_device_value,
    indexed_device,
    is_device_index,
    portable_ok,
    require_device,
)
from codemods.api.cases import Invalid, Valid
from codemods.families.cuda_method import RenameRule
from codemods.model.cstnodes import code_of


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
    - **portable**: `.cuda(non_blocking=...)` becomes `.to(DEVICE, non_blocking=...)` (docs/targets.md: one DEVICE per file, CPU when no accelerator); `.cuda(1)`, `.cuda(rank)` become `.to(torch.device(DEVICE.type, 1))` (on CPU `cpu:1` is the CPU), `.cuda("cuda:1")` becomes `.to(f"{DEVICE.type}:1")`; another device argument is reported
    """

    code = "NPU101"
    prefilter_in_code = True
    name = "cuda-method"
    summary = "`.cuda(...)` on tensors and modules becomes `.npu(...)`, arguments kept"
    prefilter = r"\.cuda\b"
    supported_targets = frozenset({"npu", "portable"})

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
        if self.target == "portable":
            return self._portable(original_node, updated_node)
        self.fixed(original_node, "`.cuda()` → `.npu()`")
        return updated_node.with_changes(func=func.with_changes(attr=cst.Name("npu")))


    def _portable(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """`.cuda(non_blocking=...)` -> `.to(DEVICE, non_blocking=...)`; `.cuda(1)`,
        `.cuda(rank)` -> `.to(torch.device(DEVICE.type, 1))`; `.cuda("cuda:1")` ->
        `.to(f"{DEVICE.type}:1")`; any other device argument is reported."""
        func = updated.func
        assert isinstance(func, cst.Attribute)
        device_at = next((i for i, arg in enumerate(updated.args)
                          if arg.keyword is None or arg.keyword.value == "device"), None)
        rest = [arg for i, arg in enumerate(updated.args) if i != device_at]
        device = self._device(updated.args[device_at].value) if device_at is not None else (
            require_device(self.context) if portable_ok(self.context.options) else None)
        if device is None:
            self.report(original, "`.cuda(...)` with a device argument that is neither an index nor a "
                                  "`cuda:N` string (or a file binding DEVICE, or a target-version without "
                                  "torch.accelerator): move it with `.to(<device>)` by hand")
            return updated
        self.fixed(original, f"`.cuda()` → `.to({code_of(device)})`")
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [cst.Arg(device, comma=comma if rest else cst.MaybeSentinel.DEFAULT), *rest]
        return updated.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)

    def _device(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        if not portable_ok(self.context.options):
            return None
        if is_device_index(value):
            return indexed_device(self.context, value.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                  if hasattr(value, "comma") else value)
        return generic_device_value(self.context, value)


CASES = [
    Invalid(
        """\
import torch
model = Net().cuda()
x = batch.cuda(non_blocking=True)
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
model = Net().to(DEVICE)
x = batch.to(DEVICE, non_blocking=True)
""",
        codes=("NPU100", "NPU101"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a device index: that device of the run's accelerator (cpu:1 is the CPU)
        """\
import torch
x = batch.cuda(1)
y = batch.cuda(args.gpu, non_blocking=True)
z = batch.cuda("cuda:0")
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
x = batch.to(torch.device(DEVICE.type, 1))
y = batch.to(torch.device(DEVICE.type, args.gpu), non_blocking=True)
z = batch.to(f"{DEVICE.type}:0")
""",
        codes=("NPU100", "NPU101"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a device argument of unknown kind (an int, a string or a device?): reported
        """\
import torch
x = batch.cuda(device)
""",
        options=(("target", "portable"),),
    ),
    Invalid(  # torch 2.5 has no torch.accelerator: reported, never torch_npu code
        """\
import torch
model = Net().cuda()
""",
        options=(("target", "portable"), ("target_version", "2.5")),
    ),
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
    Invalid(
        """\
x = t.cuda()
""",
        after="""\
x = t.npu()
""",
    ),
    Invalid(
        """\
x = t.cuda(1, non_blocking=True)
""",
        after="""\
x = t.npu(1, non_blocking=True)
""",
    ),
    Invalid(
        """\
x = t.cuda(device=dev)  # keep
""",
        after="""\
x = t.npu(device=dev)  # keep
""",
    ),
    Invalid(
        """\
model = Net().cuda().eval()
""",
        after="""\
model = Net().npu().eval()
""",
    ),
    Invalid(
        """\
y = torch.Tensor.cuda(x)
""",
        after="""\
y = torch.Tensor.npu(x)
""",
    ),
    Invalid(
        """\
from models import net
net.cuda()
""",
        after="""\
from models import net
net.npu()
""",
    ),
    Invalid(
        """\
batch = [b.cuda(
    non_blocking=True) for b in batch]
""",
        after="""\
batch = [b.npu(
    non_blocking=True) for b in batch]
""",
    ),
    Valid(
        """\
import torch
torch.cuda()
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
import torch
torch.cuda.synchronize()
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
import tvm
dev = tvm.cuda(0)
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
f = t.cuda
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
name = 'x.cuda()'  # .cuda() in a comment
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
def f(is_cuda=False):
    return is_cuda
""",
        with_rules=('NPU102',),
    ),
    Valid(
        """\
cuda(x)
""",
        with_rules=('NPU102',),
    ),
]

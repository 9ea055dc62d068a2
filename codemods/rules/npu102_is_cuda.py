"""NPU102: the is-cuda rule."""

from __future__ import annotations

import re

import libcst as cst

from codemods.analyses.portable import device_type, portable_ok
from codemods.api.cases import Invalid, Valid
from codemods.families.cuda_method import RenameRule
from npu_migrate.core.diagnostics import Severity


class IsCuda(RenameRule):
    """## What it does

    `x.is_cuda` becomes `x.is_npu`

    ## Why

    On an NPU a tensor's `is_cuda` is False, so `if x.is_cuda:` branches silently stop running.
    torch_npu generates `Tensor.is_npu` (and, from 26.x, `TypedStorage.is_npu`); `transfer_to_npu`
    aliases `is_cuda` to it at run time.

    As with NPU101, `somemodule.is_cuda` (an imported module's attribute) is left alone, and a file
    that defines its own `is_cuda` (a method, a property or a class attribute) gets a diagnostic at
    each use instead of a rewrite.

    ## Example

    ```python
    # before
    if x.is_cuda:
        torch.cuda.synchronize()
    # after (with NPU120)
    if x.is_npu:
        torch.npu.synchronize()
    ```

    ## Fix safety

    Safe: `is_npu` is the same boolean property for the NPU device.
    Suppress with `# npu-migrate: ignore[NPU102]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `x.is_cuda` becomes `(x.device.type == DEVICE.type != "cpu")`: on the run's accelerator, False for CPU tensors and on a machine without one, as before
    """

    code = "NPU102"
    name = "is-cuda"
    summary = "`x.is_cuda` becomes `x.is_npu`"
    supported_targets = frozenset({"npu", "portable"})
    prefilter = r"\.is_cuda\b"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "is_cuda":
            return updated_node
        receiver = original_node.value
        if isinstance(receiver, cst.Name) and receiver.value in self.file_facts[0]:
            return updated_node  # `somemodule.is_cuda`: a module attribute, not a tensor property
        if self.defined_here("is_cuda", original_node):
            return updated_node
        if self.target == "portable":
            return self._portable(original_node, updated_node)
        self.fixed(original_node, "`.is_cuda` → `.is_npu`")
        return updated_node.with_changes(attr=cst.Name("is_npu"))


    def _portable(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        """`x.is_cuda` -> `(x.device.type == DEVICE.type != "cpu")`: on the run's accelerator;
        False for CPU tensors and on a machine without one, as before."""
        if re.search(r"\.is_cuda\s*(?::[^=\n]*)?=(?!=)", self.context.source):
            self.report(original, "`.is_cuda` is an attribute this file sets itself (`x.is_cuda = ...`): "
                                  "left alone under --target portable; it means what the file makes it mean",
                        severity=Severity.INFO)
            return updated
        kind = device_type(self.context) if portable_ok(self.context.options) else None
        if kind is None:
            self.report(original, "`.is_cuda`: under --target portable test `x.device.type != \"cpu\"` by hand")
            return updated
        self.fixed(original, "`.is_cuda` → on the run's accelerator")
        device_kind = cst.Attribute(value=cst.Attribute(value=updated.value, attr=cst.Name("device")),
                                    attr=cst.Name("type"))
        return cst.Comparison(left=device_kind, comparisons=[
            cst.ComparisonTarget(cst.Equal(), kind),
            cst.ComparisonTarget(cst.NotEqual(), cst.SimpleString('"cpu"'))],
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


CASES = [
    Invalid(  # the file sets `.is_cuda` itself: its own attribute, left alone
        """\
import torch
class Loader:
    def __init__(self, device):
        self.is_cuda = device.type == "cuda"
    def go(self):
        return self.is_cuda
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import torch
if x.is_cuda:
    y = x.pin_memory()
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
if (x.device.type == DEVICE.type != "cpu"):
    y = x.pin_memory()
""",
        codes=("NPU100", "NPU102"),
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
if x.is_cuda:
    torch.cuda.synchronize()
""",
        after="""\
import os
import torch
if x.is_npu:
    torch.cuda.synchronize()
""",
    ),
    Valid(
        """\
import os
import torch
if x.is_npu:
    torch.cuda.synchronize()
""",
    ),
    Invalid(
        """\
if x.is_cuda:
    pass
""",
        after="""\
if x.is_npu:
    pass
""",
    ),
    Invalid(
        """\
ok = t.data.is_cuda and u.is_cuda
""",
        after="""\
ok = t.data.is_npu and u.is_npu
""",
    ),
]

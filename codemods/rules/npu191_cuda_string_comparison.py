"""NPU191: the cuda-string-comparison rule."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from codemods.analyses.devices import device_positions, is_device_name
from codemods.analyses.selectors import kernel_selectors
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import string_value
from npu_migrate.core.diagnostics import Severity

_CUDA = re.compile(r"cuda(:\d+)?")


def _spelled(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    return node.attr.value if isinstance(node, cst.Attribute) else None


class CudaStringComparison(CoverageRule):
    """## What it does

    Comparisons with `"cuda"` that no device rule could prove to be about a device are reported

    ## Why

    After the port a device or device type is `"npu"`, so comparisons with `"cuda"` silently become
    False. NPU104 rewrites them where the other side is visibly a device (`x.device.type`, `device`,
    `str(dev)`), NPU190 where it is a device constant, and the distributed rules handle `"nccl"`.
    Every remaining comparison (`==`, `!=`, `in`, `not in`) with a `"cuda"`/`"cuda:N"` literal, and
    `.startswith("cuda")`, is reported: the rule cannot prove the value is a device (`args.accelerator`
    could be anything), but it usually is. A comparison of a kernel selector (`impl == "cuda"` where
    the file also has `impl == "ref"`) names an implementation, not a device: NPU192 notes it instead.

    ## Example

    ```python
    if args.accelerator == "cuda":      # warning: compare with "npu" if this names a device
        ...
    ```

    ## Fix safety

    Diagnostic only. Suppress a line with `# npu-migrate: ignore[NPU191]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU191"
    prefilter_in_code = True
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-string-comparison"
    summary = "Comparisons with `\"cuda\"` that no device rule could prove to be about a device are reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = r"""['"]cuda(?::\d+)?['"]"""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.names = device_positions().names

    def _device_side(self, node: cst.BaseExpression) -> bool:
        if is_device_name(node, self.names):
            return True
        # a module constant holding a CUDA device: NPU190 decides about it (and reports it)
        value = self.context.facts.constants.get(node.value) if isinstance(node, cst.Name) else None
        return isinstance(value, str) and bool(_CUDA.fullmatch(value))

    @staticmethod
    def _cuda_literal(node: cst.BaseExpression) -> bool:
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return any(isinstance(e, cst.Element) and CudaStringComparison._cuda_literal(e.value)
                       for e in node.elements)
        value = string_value(node)
        return value is not None and bool(_CUDA.fullmatch(value))

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> Any:
        operands = [original_node.left, *(c.comparator for c in original_node.comparisons)]
        if not any(isinstance(c.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn))
                   for c in original_node.comparisons):
            return updated_node
        literals = [o for o in operands if self._cuda_literal(o)]
        if not literals or any(self._device_side(o) for o in operands if o not in literals):
            return updated_node
        selectors = self.context.model.derived(kernel_selectors).names
        if any(_spelled(o) in selectors for o in operands if o not in literals):
            return updated_node  # `impl == 'cuda'` names an implementation (NPU192), not a device
        self.report(original_node, "compares with \"cuda\": on an Ascend machine a device or device type "
                    "is \"npu\"; if this value names one, compare with \"npu\" (or test "
                    "torch.npu.is_available())")
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        func = original_node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "startswith" and len(original_node.args) == 1
                and self._cuda_prefix(original_node.args[0].value) and not self._device_side(func.value)):
            self.report(original_node, "tests for a \"cuda\" prefix: on an Ascend machine devices start with "
                        "\"npu\"; if this value names a device, test for \"npu\"")
        return updated_node

    @staticmethod
    def _cuda_prefix(node: cst.BaseExpression) -> bool:
        value = string_value(node)
        return value is not None and value.startswith("cuda") and bool(_CUDA.fullmatch(value))


CASES = [
    Invalid(
        """\
import os
import torch
if args.accelerator == "cuda":      # warning: compare with "npu" if this names a device
    ...
""",
    ),
    Invalid(
        """\
if args.accelerator == "cuda":
    pass
""",
        lines=(1,),
    ),
    Invalid(
        """\
ok = "cuda" in backends
""",
        lines=(1,),
    ),
    Invalid(
        """\
if name.startswith("cuda"):
    pass
""",
        lines=(1,),
    ),
    Valid(
        """\
if x.device.type == "cuda":
    pass
""",
    ),
    Valid(
        """\
if str(device).startswith("cuda"):
    pass
""",
    ),
    Valid(
        """\
if backend == "nccl":
    pass
""",
    ),
    Valid(
        """\
if kind == "cudagraph":
    pass
""",
    ),
]

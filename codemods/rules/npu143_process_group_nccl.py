"""NPU143: the process-group-nccl rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.families.distributed import DistRule


class ProcessGroupNccl(DistRule):
    code = "NPU143"
    name = "process-group-nccl"
    summary = "`ProcessGroupNCCL` is reported: torch_npu's class is `ProcessGroupHCCL`"
    fix = Fix.NONE
    needs_torch_npu = False

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._attrs: set[int] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "ProcessGroupNCCL":
            self._attrs.add(id(node.attr))
            self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "ProcessGroupNCCL" and id(node) not in self._attrs:
            self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        qualified = self.resolve(node)
        if qualified in self.table.flags:
            self.report(node, f"`{qualified}` does not exist on NPU: {self.table.flags[qualified]}")


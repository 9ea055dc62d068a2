"""NPU141: the nccl-backend-constant rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.families.distributed import DistRule
from codemods.framework.nodes import code_of


class NcclBackendConstant(DistRule):
    code = "NPU141"
    name = "nccl-backend-constant"
    summary = "`Backend.NCCL` becomes `Backend.HCCL` (defined when torch_npu registers hccl)"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "NCCL":
            return updated_node
        qualified = self.resolve(original_node)
        new = self.table.constants.get(qualified or "")
        if new is None:
            return updated_node
        new_node = updated_node.with_changes(attr=cst.Name(new))
        self.fixed(original_node, f"`{code_of(original_node)}` → `{code_of(new_node)}`")
        return new_node


"""NPU102: the is-cuda rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.families.cuda_method import RenameRule


class IsCuda(RenameRule):
    code = "NPU102"
    name = "is-cuda"
    summary = "`x.is_cuda` becomes `x.is_npu`"
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
        self.fixed(original_node, "`.is_cuda` → `.is_npu`")
        return updated_node.with_changes(attr=cst.Name("is_npu"))


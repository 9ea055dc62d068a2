"""NPU101: the cuda-method rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.families.cuda_method import RenameRule


class CudaMethod(RenameRule):
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


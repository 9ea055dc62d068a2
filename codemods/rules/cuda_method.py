"""NPU101: `.cuda(...)` -> `.npu(...)`; NPU102: `.is_cuda` -> `.is_npu`."""

import libcst as cst
import libcst.matchers as m

from npu_migrate_codemods.base import Fix, Rule


class CudaMethod(Rule):
    code = "NPU101"
    name = "cuda-method"
    summary = "`.cuda(...)` on tensors and modules becomes `.npu(...)`, arguments kept"
    fix = Fix.SAFE
    prefilter = r"\.cuda\b"
    needs_torch_npu = True

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if not m.matches(func, m.Attribute(attr=m.Name("cuda"))):
            return updated_node
        # `torch.cuda(...)` is no method call on a tensor; leave module attributes to other rules
        if self.resolve(original_node.func) is not None:
            return updated_node
        self.fixed(original_node, "`.cuda()` → `.npu()`")
        return updated_node.with_changes(func=func.with_changes(attr=cst.Name("npu")))


class IsCuda(Rule):
    code = "NPU102"
    name = "is-cuda"
    summary = "`x.is_cuda` becomes `x.is_npu`"
    fix = Fix.SAFE
    prefilter = r"\.is_cuda\b"
    needs_torch_npu = True

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "is_cuda":
            return updated_node
        self.fixed(original_node, "`.is_cuda` → `.is_npu`")
        return updated_node.with_changes(attr=cst.Name("is_npu"))

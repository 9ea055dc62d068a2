"""NPU172: the autograd-profiler-use-cuda rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.namemap import CoverageRule

_AUTOGRAD_PROFILE = frozenset({"torch.autograd.profiler.profile", "torch.autograd.profile"})


_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class AutogradProfilerUseCuda(CoverageRule):
    code = "NPU172"
    name = "autograd-profiler-use-cuda"
    summary = "`torch.autograd.profiler.profile(use_cuda=True)` becomes `use_device=\"npu\"`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"\buse_cuda\b"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) not in _AUTOGRAD_PROFILE:
            return updated_node
        args = list(updated_node.args)
        for index, arg in enumerate(args):
            if arg.keyword is None or arg.keyword.value != "use_cuda":
                continue
            value = arg.value
            if isinstance(value, cst.Name) and value.value == "False":
                if index == len(args) - 1 and index:
                    args[index - 1] = args[index - 1].with_changes(comma=arg.comma)
                del args[index]
                self.fixed(original_node, "`use_cuda=False` dropped (the default)")
            else:
                npu = cst.SimpleString('"npu"')
                new = npu if isinstance(value, cst.Name) and value.value == "True" else \
                    cst.IfExp(test=value, body=npu, orelse=cst.Name("None"))
                args[index] = arg.with_changes(keyword=cst.Name("use_device"), value=new,
                                               equal=arg.equal if arg.equal is not cst.MaybeSentinel.DEFAULT
                                               else _EQUAL)
                self.fixed(original_node, "`use_cuda=` → `use_device=\"npu\"`")
            return updated_node.with_changes(args=args)
        return updated_node


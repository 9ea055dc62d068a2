"""Profiling and tracing on NPU: NPU170 `torch.cuda.nvtx` -> `torch_npu.npu.mstx`; NPU171
`torch.profiler` -> `torch_npu.profiler` (ProfilerActivity.CUDA -> NPU); NPU172
`torch.autograd.profiler.profile(use_cuda=True)` -> `use_device="npu"`; NPU173 CUDA-only
profiler APIs (`torch.cuda.profiler`, `emit_nvtx`)."""

from __future__ import annotations

from typing import Any

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix
from codemods.rules.coverage_common import CoverageRule, NameMapRule, name_prefilter

DATA = "coverage_profiler.json"
_NVTX_RANGE = "torch.cuda.nvtx.range"
_PROFILE = frozenset({"torch.profiler.profile", "torch.profiler.profiler.profile"})
# keywords of torch.profiler.profile that torch_npu.profiler.profile does not take
_NPU_PROFILE_LACKS = ("acc_events", "post_processing_timeout_s")


class NvtxToMstx(NameMapRule):
    code = "NPU170"
    name = "nvtx-to-mstx"
    summary = "`torch.cuda.nvtx.*` ranges and marks become `torch_npu.npu.mstx.*`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU170")

    def visit_Call(self, node: cst.Call) -> None:
        # nvtx.range(msg, *args, **kwargs) formats msg; mstx.annotate takes the message only
        if self.resolve(node.func) == _NVTX_RANGE and (len(node.args) != 1 or node.args[0].keyword):
            self.vetoed.add(id(node.func))
            self.tree.nodes("formatted").add(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if original_node in self.tree.nodes("formatted"):
            self.report(original_node, "nvtx.range formats its message with the extra arguments; "
                        "mstx.annotate takes a finished message: write "
                        "`torch_npu.npu.mstx.annotate(msg.format(...))`", severity=Severity.WARNING)
        return updated_node


class ProfilerToTorchNpu(NameMapRule):
    code = "NPU171"
    name = "profiler-to-torch-npu"
    summary = "`torch.profiler.profile` and friends become `torch_npu.profiler.*`; `ProfilerActivity.CUDA` → `.NPU`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU171")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) in _PROFILE:
            for arg in original_node.args:
                if arg.keyword is not None and arg.keyword.value in _NPU_PROFILE_LACKS:
                    self.report(arg, f"torch_npu.profiler.profile has no `{arg.keyword.value}=`: remove it",
                                severity=Severity.WARNING)
        return updated_node


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


class CudaProfilerApi(NameMapRule):
    code = "NPU173"
    name = "cuda-profiler-api"
    summary = "CUDA-only profiler entry points (`torch.cuda.profiler`, `emit_nvtx`) are reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU173")

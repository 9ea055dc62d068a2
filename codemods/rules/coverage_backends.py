"""`torch.backends.cuda` / `torch.backends.cudnn` knobs on NPU (fact sheet §2.5):
NPU160 TF32 switches -> HF32 switches; NPU161 cuDNN flags that do nothing on NPU; NPU162 SDP
kernel switches; NPU163 the cuFFT plan cache -> `torch.npu.backends.fft_plan_cache`;
NPU164 queries about the CUDA build (cuDNN version, `is_built`, ...)."""

from __future__ import annotations

from typing import Any

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix, dotted_parts
from codemods.rules.coverage_common import NameMapRule, name_prefilter

DATA = "coverage_backends.json"


class Tf32ToHf32(NameMapRule):
    code = "NPU160"
    name = "tf32-to-hf32"
    summary = "`torch.backends.cuda.matmul.allow_tf32` / `cudnn.allow_tf32` become `torch.npu.matmul/conv.allow_hf32`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU160")


class CudnnFlags(NameMapRule):
    code = "NPU161"
    name = "cudnn-flags"
    summary = "`cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU161")


class SdpKernelSwitches(NameMapRule):
    code = "NPU162"
    name = "sdp-kernel-switches"
    summary = "`torch.backends.cuda.sdp_kernel` / `enable_*_sdp` are unsupported on NPU: use `sdpa_kernel`"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU162")


_PLAN_CACHE = "torch.backends.cuda.cufft_plan_cache"
_MAX_PLAN_CACHE = 99  # torch_npu's fft plan cache accepts max_size 1..99


class FftPlanCache(NameMapRule):
    code = "NPU163"
    name = "fft-plan-cache"
    summary = "`torch.backends.cuda.cufft_plan_cache` becomes `torch.npu.backends.fft_plan_cache`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU163")

    def _is_cache(self, node: cst.BaseExpression) -> bool:
        return dotted_parts(node) is not None and self.resolve(node) == _PLAN_CACHE

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `cufft_plan_cache[i]`: CUDA keeps one cache per device, the NPU one cache
        if self._is_cache(node.value):
            self.vetoed.add(id(node.value))
            self.tree.nodes("indexed").add(node)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> Any:
        if original_node in self.tree.nodes("indexed"):
            self.report(original_node, "the NPU has one FFT plan cache, not one per device: use "
                        "torch.npu.backends.fft_plan_cache (the current device's) without an index",
                        severity=Severity.WARNING)
        return updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> Any:
        value = original_node.value
        for target in original_node.targets:
            node = target.target
            if (isinstance(node, cst.Attribute) and node.attr.value == "max_size"
                    and self._is_cache(node.value) and isinstance(value, cst.Integer)
                    and not 1 <= int(value.value, 0) <= _MAX_PLAN_CACHE):
                self.report(value, f"torch_npu's fft_plan_cache.max_size must be between 1 and "
                            f"{_MAX_PLAN_CACHE}", severity=Severity.WARNING)
        return updated_node


class CudaBuildQueries(NameMapRule):
    code = "NPU164"
    name = "cuda-build-queries"
    summary = "Queries about cuDNN/cuBLAS (`cudnn.is_available()`, `cudnn.version()`, ...) answer 'no' on NPU"
    fix = Fix.NONE
    severity = Severity.INFO
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU164")

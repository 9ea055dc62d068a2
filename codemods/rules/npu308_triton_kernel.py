"""NPU308: the triton-kernel rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class TritonKernel(ThirdPartyRule):
    code = "NPU308"
    name = "triton-kernel"
    summary = "hand-written Triton kernels do not run on NPU: PyTorch ops or an Ascend C operator"
    prefilter = library_prefilter("NPU308")


"""NPU309: the cupy rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class Cupy(ThirdPartyRule):
    code = "NPU309"
    name = "cupy"
    summary = "CuPy arrays and kernels are CUDA-only: torch tensors on the NPU or numpy"
    prefilter = library_prefilter("NPU309")


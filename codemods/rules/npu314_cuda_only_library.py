"""NPU314: the cuda-only-library rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class OtherCudaLibrary(ThirdPartyRule):
    code = "NPU314"
    name = "cuda-only-library"
    summary = "Other CUDA-only libraries (PyCUDA, numba.cuda, TensorRT, Transformer Engine) have no NPU path"
    prefilter = library_prefilter("NPU314")


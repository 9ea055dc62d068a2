"""NPU314: the cuda-only-library rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class OtherCudaLibrary(ThirdPartyRule):
    """## What it does

    Other CUDA-only libraries (PyCUDA, numba.cuda, Transformer Engine, RAPIDS, mamba-ssm, ...) have no NPU path

    ## Why

    PyCUDA, numba.cuda, Transformer Engine, NVIDIA DALI, RAPIDS (cuDF, cuML), mamba-ssm, causal-conv1d, tiny-cuda-nn, Liger Kernel, Unsloth, Tutel and NVIDIA's own Python packages drive NVIDIA hardware directly and have no NPU path. The entries and their routes are the catalogue's (`codemods/data/cuda_only.json`); inference engines such as TensorRT are NPU317.

    ## Example

    ```python
    from numba import cuda                      # NPU314
    import transformer_engine.pytorch as te     # NPU314
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU314]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU314"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-only-library"
    summary = "Other CUDA-only libraries (PyCUDA, numba.cuda, Transformer Engine, RAPIDS, mamba-ssm, ...) have no NPU path"
    prefilter = library_prefilter("NPU314")


CASES = [
    Invalid(
        """\
import os
import torch
from numba import cuda
import transformer_engine.pytorch as te
""",
    ),
    Invalid(  # Swin-Transformer's MoE models
        """\
try:
    from tutel import moe as tutel_moe
except:
    tutel_moe = None
""",
    ),
]

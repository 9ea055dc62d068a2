"""NPU309: the cupy rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class Cupy(ThirdPartyRule):
    """## What it does

    CuPy arrays and kernels are CUDA-only: torch tensors on the NPU or numpy

    ## Why

    CuPy arrays live on CUDA devices and its kernels are CUDA code.

    ## Example

    ```python
    import cupy as cp                                # NPU309
    a = cp.asarray(t)

    # instead: keep the torch tensor on the NPU and use torch ops
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU309]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU309"
    supported_targets = frozenset({"npu", "portable"})
    name = "cupy"
    summary = "CuPy arrays and kernels are CUDA-only: torch tensors on the NPU or numpy"
    prefilter = library_prefilter("NPU309")


CASES = [
    Invalid(
        """\
import os
import torch
import cupy as cp
a = cp.asarray(t)
""",
    ),
    Valid(
        """\
import os
import torch

""",
    ),
]

"""NPU308: the triton-kernel rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class TritonKernel(ThirdPartyRule):
    """## What it does

    hand-written Triton kernels do not run on NPU: PyTorch ops or an Ascend C operator

    ## Why

    Hand-written Triton kernels target NVIDIA GPUs. The mapping in the fact sheet has no Triton path for NPU; `transfer_to_npu` forces `has_triton` to False for Inductor and Dynamo. Imports of `triton` and each `@triton.jit` / `@triton.autotune` are reported so every kernel is found.

    ## Example

    ```python
    import triton                                     # NPU308

    @triton.jit                                       # NPU308
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...

    # instead: the PyTorch ops the kernel fuses
    out = x + y
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU308]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU308"
    prefilter_in_code = True
    supported_targets = frozenset({"npu", "portable"})
    name = "triton-kernel"
    summary = "hand-written Triton kernels do not run on NPU: PyTorch ops or an Ascend C operator"
    prefilter = library_prefilter("NPU308")


CASES = [
    Invalid(
        """\
import os
import torch
import triton

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...
""",
    ),
    Valid(
        """\
import os
import torch
out = x + y
""",
    ),
]

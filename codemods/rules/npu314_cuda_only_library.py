"""NPU314: the cuda-only-library rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class OtherCudaLibrary(ThirdPartyRule):
    """## What it does

    Other CUDA-only libraries (PyCUDA, numba.cuda, TensorRT, Transformer Engine) have no NPU path

    ## Why

    PyCUDA, numba.cuda, TensorRT, Torch-TensorRT and Transformer Engine drive NVIDIA hardware directly and have no NPU path. For graph-mode inference on Ascend the fact sheet lists `torch.compile` backends `npugraphs` / `npugraph_ex` and TorchAir.

    | Reported | Route |
    |---|---|
    | `pycuda` (import) | PyCUDA drives the CUDA runtime directly and has no NPU counterpart: use torch tensors and ops on the NPU |
    | `numba.cuda` (import, reference) | numba.cuda kernels run on NVIDIA GPUs only: rewrite them with torch ops (or numba on the CPU) |
    | `tensorrt` (import) | TensorRT is NVIDIA's inference runtime: on Ascend use torch.compile (backends npugraphs / npugraph_ex) or TorchAir for graph-mode inference |
    | `torch_tensorrt` (import) | Torch-TensorRT compiles for NVIDIA GPUs: on Ascend use torch.compile (backends npugraphs / npugraph_ex) or TorchAir |
    | `transformer_engine` (import) | Transformer Engine (FP8 kernels) is CUDA-only: use bf16/fp16 autocast on NPU and plain torch.nn layers |

    ## Example

    ```python
    from numba import cuda                      # NPU314
    import tensorrt as trt                      # NPU314
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
    summary = "Other CUDA-only libraries (PyCUDA, numba.cuda, TensorRT, Transformer Engine) have no NPU path"
    prefilter = library_prefilter("NPU314")


CASES = [
    Invalid(
        """\
import os
import torch
from numba import cuda
import tensorrt as trt
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

"""NPU317: the cuda-only-engine rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter
from npu_migrate.core.diagnostics import Severity


class CudaOnlyEngine(ThirdPartyRule):
    """## What it does

    Inference engines and serving kernels built for NVIDIA GPUs only (TensorRT, Torch-TensorRT, TensorRT-LLM, LightLLM, ExLlamaV2, FlashInfer, vLLM's compiled CUDA ops) are reported as errors

    ## Why

    These engines are CUDA programs: their kernels, engine files and runtimes have no Ascend build, so a migrated program that reaches them stops there, whatever the device rules did around them. Each report says what serves the same purpose on Ascend (MindIE, vLLM with the vllm-ascend plugin, torch.compile's NPU backends or TorchAir, torch_npu's fused inference attention). vLLM itself is not reported: its public API runs on Ascend through vllm-ascend; only its CUDA ops (`vllm._C`, `vllm._custom_ops`) are. The entries, with their status and route, are the catalogue's (`codemods/data/cuda_only.json`, kind `engine`). A CUDA guard in front of such an engine stays on CUDA (NPU511).

    ## Example

    ```python
    from exllamav2 import ExLlamaV2, ExLlamaV2Config      # NPU317 (error)
    import tensorrt as trt                                # NPU317 (error)
    ```

    ## Fix safety

    No fix: diagnostic only (error: the program cannot run this on NPU). Replacing an engine is a design decision. Suppress a line with `# npu-migrate: ignore[NPU317]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU317"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-only-engine"
    summary = "Inference engines for NVIDIA GPUs only (TensorRT, TensorRT-LLM, LightLLM, ExLlamaV2, FlashInfer, vLLM CUDA ops) are errors"
    severity = Severity.ERROR
    prefilter = library_prefilter("NPU317")


CASES = [
    Invalid(
        """\
import tensorrt as trt
from exllamav2 import ExLlamaV2, ExLlamaV2Config
from lightllm.server.api_server import main
from vllm import _custom_ops as ops
""",
    ),
    Valid(  # vLLM's public API runs on Ascend with vllm-ascend
        """\
from vllm import LLM, SamplingParams
llm = LLM(model="m")
""",
    ),
]

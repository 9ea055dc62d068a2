"""NPU312: the cuda-source-file rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.families.third_party import ThirdPartyRule, entries
from npu_migrate.core.diagnostics import Diagnostic, Severity


def cu_file_diagnostic(path: str) -> Diagnostic:
    """The report for a CUDA source file (`.cu`/`.cuh`) met during discovery (NPU312)."""
    entry = next(e for e in entries() if e.get("code") == "NPU312")
    return Diagnostic("NPU312", entry["message"], path, 0, 0, Severity.WARNING)


class CudaSourceFile(ThirdPartyRule):
    """## What it does

    `.cu`/`.cuh` files in the tree cannot be compiled for NPU (reported by file discovery)

    ## Why

    A `.cu`/`.cuh` file is CUDA source: it cannot be compiled for NPU. The engine hands each `.cu`/`.cuh` file it discovers to the text rules of language `cuda`; this one reports the file (line 0: the whole file). References from Python (`CUDAExtension`, `load(sources=[...'.cu'])`) are NPU311.

    ## Example

    ```text
    csrc/fused_kernel.cu:0:0: NPU312 CUDA source file: it cannot be compiled for NPU; ...
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU312]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU312"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-source-file"
    summary = "`.cu`/`.cuh` files in the tree cannot be compiled for NPU (reported by file discovery)"
    language = "cuda"  # a text rule over CUDA sources: the engine hands it `.cu`/`.cuh` files
    prefilter = ""

    def rewrite_text(self, text: str) -> str:
        self.context.diagnostics.append(cu_file_diagnostic(self.context.path))
        return text


CASES = [
    Invalid(
        """\
__global__ void add(float *x) {}
""",
        path='kernel.cu',
    ),
]

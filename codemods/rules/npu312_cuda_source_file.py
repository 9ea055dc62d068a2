"""NPU312: the cuda-source-file rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, entries
from npu_migrate.core.diagnostics import Diagnostic, Severity


def cu_file_diagnostic(path: str) -> Diagnostic:
    """The report for a CUDA source file (`.cu`/`.cuh`) met during discovery (NPU312)."""
    entry = next(e for e in entries() if e["code"] == "NPU312")
    return Diagnostic("NPU312", entry["message"], path, 0, 0, Severity.WARNING)


class CudaSourceFile(ThirdPartyRule):
    code = "NPU312"
    name = "cuda-source-file"
    summary = "`.cu`/`.cuh` files in the tree cannot be compiled for NPU (reported by file discovery)"
    language = "cuda"  # a text rule over CUDA sources: the engine hands it `.cu`/`.cuh` files
    prefilter = ""

    def rewrite_text(self, text: str) -> str:
        self.context.diagnostics.append(cu_file_diagnostic(self.context.path))
        return text


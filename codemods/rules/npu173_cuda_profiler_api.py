"""NPU173: the cuda-profiler-api rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


class CudaProfilerApi(NameMapRule):
    """## What it does

    CUDA-only profiler entry points (`torch.cuda.profiler`, `emit_nvtx`) are reported

    ## Why

    `torch.cuda.profiler` (`start`, `stop`, `profile`, `init`) drives cudaProfilerStart/Stop for Nsight,
    and `torch.autograd.profiler.emit_nvtx` emits NVTX ranges; neither exists on NPU (`emit_nvtx` is ✘
    in the support list). The rule reports each use and the import of the module, pointing at
    `torch_npu.profiler.profile(activities=[ProfilerActivity.NPU], ...)`, `msprof`, or `torch_npu.npu.mstx`
    ranges. Nothing is rewritten: the replacements are set up differently.

    ## Example

    ```python
    torch.cuda.profiler.start()                      # warning
    with torch.autograd.profiler.emit_nvtx():        # warning
        train_step()
    ```

    ## Fix safety

    Diagnostic only. Suppress a line with `# npu-migrate: ignore[NPU173]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU173"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-profiler-api"
    summary = "CUDA-only profiler entry points (`torch.cuda.profiler`, `emit_nvtx`) are reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU173")


CASES = [
    Invalid(
        """\
import os
import torch
torch.cuda.profiler.start()                      # warning
with torch.autograd.profiler.emit_nvtx():        # warning
    train_step()
""",
    ),
]

"""NPU173: the cuda-profiler-api rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


class CudaProfilerApi(NameMapRule):
    code = "NPU173"
    name = "cuda-profiler-api"
    summary = "CUDA-only profiler entry points (`torch.cuda.profiler`, `emit_nvtx`) are reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU173")


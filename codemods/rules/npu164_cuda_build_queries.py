"""NPU164: the cuda-build-queries rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class CudaBuildQueries(NameMapRule):
    code = "NPU164"
    name = "cuda-build-queries"
    summary = "Queries about cuDNN/cuBLAS (`cudnn.is_available()`, `cudnn.version()`, ...) answer 'no' on NPU"
    fix = Fix.NONE
    severity = Severity.INFO
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU164")


"""NPU161: the cudnn-flags rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class CudnnFlags(NameMapRule):
    code = "NPU161"
    name = "cudnn-flags"
    summary = "`cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU161")


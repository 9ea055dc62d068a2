"""NPU162: the sdp-kernel-switches rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class SdpKernelSwitches(NameMapRule):
    code = "NPU162"
    name = "sdp-kernel-switches"
    summary = "`torch.backends.cuda.sdp_kernel` / `enable_*_sdp` are unsupported on NPU: use `sdpa_kernel`"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU162")


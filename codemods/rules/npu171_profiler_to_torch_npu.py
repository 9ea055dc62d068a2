"""NPU171: the profiler-to-torch-npu rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


_PROFILE = frozenset({"torch.profiler.profile", "torch.profiler.profiler.profile"})


# keywords of torch.profiler.profile that torch_npu.profiler.profile does not take
_NPU_PROFILE_LACKS = ("acc_events", "post_processing_timeout_s")


class ProfilerToTorchNpu(NameMapRule):
    code = "NPU171"
    name = "profiler-to-torch-npu"
    summary = "`torch.profiler.profile` and friends become `torch_npu.profiler.*`; `ProfilerActivity.CUDA` → `.NPU`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU171")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) in _PROFILE:
            for arg in original_node.args:
                if arg.keyword is not None and arg.keyword.value in _NPU_PROFILE_LACKS:
                    self.report(arg, f"torch_npu.profiler.profile has no `{arg.keyword.value}=`: remove it",
                                severity=Severity.WARNING)
        return updated_node


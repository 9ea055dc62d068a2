"""NPU170: the nvtx-to-mstx rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


_NVTX_RANGE = "torch.cuda.nvtx.range"


class NvtxToMstx(NameMapRule):
    code = "NPU170"
    name = "nvtx-to-mstx"
    summary = "`torch.cuda.nvtx.*` ranges and marks become `torch_npu.npu.mstx.*`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU170")

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.formatted: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        # nvtx.range(msg, *args, **kwargs) formats msg; mstx.annotate takes the message only
        if self.resolve(node.func) == _NVTX_RANGE and (len(node.args) != 1 or node.args[0].keyword):
            self.vetoed.add(id(node.func))
            self.formatted.add(id(node))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if id(original_node) in self.formatted:
            self.report(original_node, "nvtx.range formats its message with the extra arguments; "
                        "mstx.annotate takes a finished message: write "
                        "`torch_npu.npu.mstx.annotate(msg.format(...))`", severity=Severity.WARNING)
        return updated_node


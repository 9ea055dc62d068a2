"""NPU163: the fft-plan-cache rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix, dotted_parts
from codemods.framework.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


_PLAN_CACHE = "torch.backends.cuda.cufft_plan_cache"


_MAX_PLAN_CACHE = 99  # torch_npu's fft plan cache accepts max_size 1..99


class FftPlanCache(NameMapRule):
    code = "NPU163"
    name = "fft-plan-cache"
    summary = "`torch.backends.cuda.cufft_plan_cache` becomes `torch.npu.backends.fft_plan_cache`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU163")

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.indexed: set[int] = set()

    def _is_cache(self, node: cst.BaseExpression) -> bool:
        return dotted_parts(node) is not None and self.resolve(node) == _PLAN_CACHE

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `cufft_plan_cache[i]`: CUDA keeps one cache per device, the NPU one cache
        if self._is_cache(node.value):
            self.vetoed.add(id(node.value))
            self.indexed.add(id(node))

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> Any:
        if id(original_node) in self.indexed:
            self.report(original_node, "the NPU has one FFT plan cache, not one per device: use "
                        "torch.npu.backends.fft_plan_cache (the current device's) without an index",
                        severity=Severity.WARNING)
        return updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> Any:
        value = original_node.value
        for target in original_node.targets:
            node = target.target
            if (isinstance(node, cst.Attribute) and node.attr.value == "max_size"
                    and self._is_cache(node.value) and isinstance(value, cst.Integer)
                    and not 1 <= int(value.value, 0) <= _MAX_PLAN_CACHE):
                self.report(value, f"torch_npu's fft_plan_cache.max_size must be between 1 and "
                            f"{_MAX_PLAN_CACHE}", severity=Severity.WARNING)
        return updated_node


"""NPU163: the fft-plan-cache rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from codemods.model.cstnodes import dotted_parts
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


_PLAN_CACHE = "torch.backends.cuda.cufft_plan_cache"


_MAX_PLAN_CACHE = 99  # torch_npu's fft plan cache accepts max_size 1..99


class FftPlanCache(NameMapRule):
    """## What it does

    `torch.backends.cuda.cufft_plan_cache` becomes `torch.npu.backends.fft_plan_cache`

    ## Why

    `torch.backends.cuda.cufft_plan_cache` becomes `torch.npu.backends.fft_plan_cache`, which has the
    same `size`, `max_size` and `clear()` (fact sheet §2.5). Two differences are reported: the NPU has
    one cache, not one per device, so `cufft_plan_cache[i]` is left alone and flagged; and
    `max_size` must be between 1 and 99, so a literal outside that range is flagged.

    ## Example

    ```python
    # before
    torch.backends.cuda.cufft_plan_cache.max_size = 32
    torch.backends.cuda.cufft_plan_cache.clear()
    # after
    torch.npu.backends.fft_plan_cache.max_size = 32
    torch.npu.backends.fft_plan_cache.clear()
    ```

    ## Fix safety

    Safe: same attributes. Indexed uses and out-of-range sizes are reported, not changed. Suppress a line with `# npu-migrate: ignore[NPU163]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU163"
    name = "fft-plan-cache"
    summary = "`torch.backends.cuda.cufft_plan_cache` becomes `torch.npu.backends.fft_plan_cache`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU163")

    def _is_cache(self, node: cst.BaseExpression) -> bool:
        return dotted_parts(node) is not None and self.resolve(node) == _PLAN_CACHE

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `cufft_plan_cache[i]`: CUDA keeps one cache per device, the NPU one cache
        if self._is_cache(node.value):
            self.vetoed.add(id(node.value))
            self.tree.nodes("indexed").add(node)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> Any:
        if original_node in self.tree.nodes("indexed"):
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


CASES = [
    Invalid(
        """\
import os
import torch
torch.backends.cuda.cufft_plan_cache.max_size = 32
torch.backends.cuda.cufft_plan_cache.clear()
""",
        after="""\
import os
import torch
torch.npu.backends.fft_plan_cache.max_size = 32
torch.npu.backends.fft_plan_cache.clear()
""",
    ),
    Valid(
        """\
import os
import torch
torch.npu.backends.fft_plan_cache.max_size = 32
torch.npu.backends.fft_plan_cache.clear()
""",
    ),
]

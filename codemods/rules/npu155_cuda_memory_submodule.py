"""NPU155: the cuda-memory-submodule rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter

DATA = "coverage_memory.json"


class CudaMemorySubmodule(NameMapRule):
    code = "NPU155"
    name = "cuda-memory-submodule"
    summary = "`torch.cuda.memory.<fn>` (reached through the submodule) becomes `torch.npu.memory.<fn>`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU155")


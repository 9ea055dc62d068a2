"""NPU176: the cuda-graphs rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter

DATA = "coverage_graphs.json"


class CudaGraphs(NameMapRule):
    code = "NPU176"
    name = "cuda-graphs"
    summary = "`torch.cuda.CUDAGraph` / `graph` / `make_graphed_callables` become NPU graphs (inference only)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU176")


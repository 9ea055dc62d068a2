"""NPU150: the typed-cuda-tensor rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter

DATA = "coverage_tensors.json"


class TypedTensor(NameMapRule):
    code = "NPU150"
    name = "typed-cuda-tensor"
    summary = "`torch.cuda.FloatTensor` and the other typed CUDA classes become `torch.npu.*` (float64 flagged)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU150")


"""NPU160: the tf32-to-hf32 rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.namemap import NameMapRule, name_prefilter

DATA = "coverage_backends.json"


class Tf32ToHf32(NameMapRule):
    code = "NPU160"
    name = "tf32-to-hf32"
    summary = "`torch.backends.cuda.matmul.allow_tf32` / `cudnn.allow_tf32` become `torch.npu.matmul/conv.allow_hf32`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU160")


"""NPU301: the apex-amp rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class ApexAmp(ThirdPartyRule):
    code = "NPU301"
    name = "apex-amp"
    summary = "apex (amp and the package as a whole) is CUDA-only: native AMP with torch.autocast('npu') + GradScaler('npu')"
    prefilter = library_prefilter("NPU301")


"""NPU306: the xformers rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class Xformers(ThirdPartyRule):
    code = "NPU306"
    name = "xformers"
    summary = "xformers attention: use torch_npu.npu_fusion_attention or scaled_dot_product_attention"
    prefilter = library_prefilter("NPU306")


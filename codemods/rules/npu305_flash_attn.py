"""NPU305: the flash-attn rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class FlashAttn(ThirdPartyRule):
    code = "NPU305"
    name = "flash-attn"
    summary = "flash-attn: use torch_npu.npu_fusion_attention (layout, scale, keep_prob and mask spelled out) or SDPA"
    prefilter = library_prefilter("NPU305")


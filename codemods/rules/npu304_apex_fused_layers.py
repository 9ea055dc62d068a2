"""NPU304: the apex-fused-layers rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class ApexFusedLayers(ThirdPartyRule):
    code = "NPU304"
    name = "apex-fused-layers"
    summary = "apex fused layers (FusedLayerNorm, FusedRMSNorm, contrib): use torch.nn layers or torch_npu fused ops"
    prefilter = library_prefilter("NPU304")


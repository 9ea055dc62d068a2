"""NPU302: the apex-fused-optimizer rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class ApexFusedOptimizer(ThirdPartyRule):
    code = "NPU302"
    name = "apex-fused-optimizer"
    summary = "apex FusedAdam/FusedLAMB/FusedSGD are CUDA kernels: use torch.optim"
    prefilter = library_prefilter("NPU302")


"""NPU303: the apex-parallel rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class ApexParallel(ThirdPartyRule):
    code = "NPU303"
    name = "apex-parallel"
    summary = "apex DistributedDataParallel/SyncBatchNorm: use torch DDP (hccl) and torch.nn.SyncBatchNorm"
    prefilter = library_prefilter("NPU303")


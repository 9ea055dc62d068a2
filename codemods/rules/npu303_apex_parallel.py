"""NPU303: the apex-parallel rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class ApexParallel(ThirdPartyRule):
    """## What it does

    apex DistributedDataParallel/SyncBatchNorm: use torch DDP (hccl) and torch.nn.SyncBatchNorm

    ## Why

    apex's DDP and SyncBatchNorm are CUDA-only. torch's `DistributedDataParallel` with the `hccl` backend and `torch.nn.SyncBatchNorm` run on NPU (the SyncBatchNorm kernels `batch_norm_stats`, `batch_norm_gather_stats_with_counts` and `batch_norm_elemt` are registered by op-plugin). Options such as `delay_allreduce` have no counterpart, so the change is left to you.

    ## Example

    ```python
    from apex.parallel import DistributedDataParallel, convert_syncbn_model   # NPU303 (twice)

    # instead
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU303]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU303"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-parallel"
    summary = "apex DistributedDataParallel/SyncBatchNorm: use torch DDP (hccl) and torch.nn.SyncBatchNorm"
    prefilter = library_prefilter("NPU303")


CASES = [
    Invalid(
        """\
import os
import torch
from apex.parallel import DistributedDataParallel, convert_syncbn_model
""",
    ),
    Valid(
        """\
import os
import torch
model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
""",
    ),
]

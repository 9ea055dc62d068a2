"""NPU304: the apex-fused-layers rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class ApexFusedLayers(ThirdPartyRule):
    """## What it does

    apex fused layers (FusedLayerNorm, FusedRMSNorm, contrib): use torch.nn layers or torch_npu fused ops

    ## Why

    apex's fused layers (FusedLayerNorm, FusedRMSNorm, contrib, transformer) are CUDA kernels; `torch.nn.LayerNorm`, `torch.nn.RMSNorm` and the fused `torch_npu.npu_rms_norm` run on NPU.

    ## Example

    ```python
    from apex.normalization import FusedLayerNorm       # NPU304
    norm = FusedLayerNorm(1024)

    # instead
    norm = torch.nn.LayerNorm(1024)
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU304]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU304"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-fused-layers"
    summary = "apex fused layers (FusedLayerNorm, FusedRMSNorm, contrib): use torch.nn layers or torch_npu fused ops"
    prefilter = library_prefilter("NPU304")


CASES = [
    Invalid(
        """\
import os
import torch
from apex.normalization import FusedLayerNorm
norm = FusedLayerNorm(1024)
""",
    ),
    Valid(
        """\
import os
import torch
norm = torch.nn.LayerNorm(1024)
""",
    ),
]

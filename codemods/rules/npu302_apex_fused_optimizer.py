"""NPU302: the apex-fused-optimizer rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class ApexFusedOptimizer(ThirdPartyRule):
    """## What it does

    apex FusedAdam/FusedLAMB/FusedSGD are CUDA kernels: use torch.optim

    ## Why

    apex's fused optimizers are CUDA kernels. `torch.optim` has drop-in counterparts for most of them (FusedAdam with its default `adam_w_mode=True` is AdamW). The fact sheet does not establish an exact torch_npu fused optimizer for them, so nothing is rewritten: the argument sets differ (`bias_correction`, `set_grad_none`, `adam_w_mode`).

    ## Example

    ```python
    from apex.optimizers import FusedAdam                              # NPU302
    opt = FusedAdam(model.parameters(), lr=1e-3, weight_decay=0.01)

    # instead
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU302]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU302"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-fused-optimizer"
    summary = "apex FusedAdam/FusedLAMB/FusedSGD are CUDA kernels: use torch.optim"
    prefilter = library_prefilter("NPU302")


CASES = [
    Invalid(
        """\
import os
import torch
from apex.optimizers import FusedAdam
opt = FusedAdam(model.parameters(), lr=1e-3, weight_decay=0.01)
""",
    ),
    Valid(
        """\
import os
import torch
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
""",
    ),
]

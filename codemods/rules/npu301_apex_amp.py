"""NPU301: the apex-amp rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class ApexAmp(ThirdPartyRule):
    """## What it does

    apex (amp and the package as a whole) is CUDA-only: native AMP with torch.autocast('npu') + GradScaler('npu')

    ## Why

    NVIDIA apex ships CUDA kernels and has no NPU build. Its AMP front end (`amp.initialize`, `amp.scale_loss`) maps onto native AMP, which torch_npu supports: `torch.autocast('npu', dtype=...)` and `torch.amp.GradScaler('npu')` (fact sheet §2.3). `transfer_to_npu` does nothing for apex.

    ## Example

    ```python
    from apex import amp                                            # NPU301
    model, opt = amp.initialize(model, opt, opt_level="O1")         # NPU301
    with amp.scale_loss(loss, opt) as scaled:                      # NPU301
        scaled.backward()

    # instead
    scaler = torch.amp.GradScaler("npu")
    with torch.autocast("npu", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU301]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU301"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-amp"
    summary = "apex (amp and the package as a whole) is CUDA-only: native AMP with torch.autocast('npu') + GradScaler('npu')"
    prefilter = library_prefilter("NPU301")


CASES = [
    Invalid(
        """\
import os
import torch
from apex import amp
model, opt = amp.initialize(model, opt, opt_level="O1")
with amp.scale_loss(loss, opt) as scaled:
    scaled.backward()
""",
    ),
    Valid(
        """\
import os
import torch
scaler = torch.amp.GradScaler("npu")
with torch.autocast("npu", dtype=torch.float16):
    loss = criterion(model(x), y)
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
""",
    ),
]

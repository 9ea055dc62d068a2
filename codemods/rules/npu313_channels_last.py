"""NPU313: the channels-last rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class ChannelsLast(ThirdPartyRule):
    """## What it does

    `torch.channels_last` is unsupported by Ascend's auto-migration: drop it unless measured on NPU

    ## Why

    `channels_last` is unsupported by Ascend's auto-migration (hiascend PT_LMTMOG_0014, fact sheet §1.6), and NPU kernels pick their own internal formats, so the NHWC hint rarely helps and may conflict with Ascend-adapted libraries. Each `torch.channels_last` / `torch.channels_last_3d` use is reported.

    ## Example

    ```python
    model = model.to(memory_format=torch.channels_last)     # NPU313

    # instead
    model = model  # keep the default format on NPU
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU313]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU313"
    supported_targets = frozenset({"npu", "portable"})
    name = "channels-last"
    summary = "`torch.channels_last` is unsupported by Ascend's auto-migration: drop it unless measured on NPU"
    prefilter = library_prefilter("NPU313")


CASES = [
    Invalid(
        """\
import os
import torch
model = model.to(memory_format=torch.channels_last)
""",
    ),
    Valid(
        """\
import os
import torch
model = model  # keep the default format on NPU
""",
    ),
]

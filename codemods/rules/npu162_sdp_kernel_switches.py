"""NPU162: the sdp-kernel-switches rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class SdpKernelSwitches(NameMapRule):
    """## What it does

    `torch.backends.cuda.sdp_kernel` / `enable_*_sdp` are unsupported on NPU: use `sdpa_kernel`

    ## Why

    `torch.backends.cuda.sdp_kernel(...)`, `enable_flash_sdp`, `enable_mem_efficient_sdp`,
    `enable_math_sdp`, `enable_cudnn_sdp`, the `*_sdp_enabled` getters and the `can_use_*`
    predicates are ✘ in the torch_npu support list; torch_npu's shims only set the global flags and
    warn (fact sheet §2.5). To choose the SDPA backend use `torch.nn.attention.sdpa_kernel([...])`;
    forcing the math backend on NPU also needs `torch.npu.use_compatible_impl(True)`.
    `F.scaled_dot_product_attention` itself runs natively on NPU.

    ## Example

    ```python
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True):   # warning
        out = F.scaled_dot_product_attention(q, k, v)
    # instead
    torch.npu.use_compatible_impl(True)
    with torch.nn.attention.sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Fix safety

    Diagnostic only: the switches take different arguments and the NPU needs an extra call. Suppress a line with `# npu-migrate: ignore[NPU162]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU162"
    supported_targets = frozenset({"npu", "portable"})
    name = "sdp-kernel-switches"
    summary = "`torch.backends.cuda.sdp_kernel` / `enable_*_sdp` are unsupported on NPU: use `sdpa_kernel`"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU162")


CASES = [
    Invalid(
        """\
import os
import torch
with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True):   # warning
    out = F.scaled_dot_product_attention(q, k, v)
""",
    ),
    Valid(
        """\
import os
import torch
torch.npu.use_compatible_impl(True)
with torch.nn.attention.sdpa_kernel([SDPBackend.MATH]):
    out = F.scaled_dot_product_attention(q, k, v)
""",
    ),
]

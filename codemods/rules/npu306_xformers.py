"""NPU306: the xformers rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class Xformers(ThirdPartyRule):
    """## What it does

    xformers attention: use torch_npu.npu_fusion_attention or scaled_dot_product_attention

    ## Why

    xformers' attention kernels are CUDA-only. `memory_efficient_attention` takes [batch, seq, heads, head_dim], which is `npu_fusion_attention`'s `'BSND'` layout; the same differences as for flash-attn apply (7-tuple result, default scale 1.0, `keep_prob`, True = masked out). A tensor `attn_bias` is easiest through SDPA with q/k/v transposed to [batch, heads, seq, head_dim].

    ## Example

    ```python
    import xformers.ops as xops
    out = xops.memory_efficient_attention(q, k, v)      # NPU306 (and the import)

    # instead
    out = torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", scale=q.shape[-1] ** -0.5)[0]
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU306]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU306"
    supported_targets = frozenset({"npu", "portable"})
    name = "xformers"
    summary = "xformers attention: use torch_npu.npu_fusion_attention or scaled_dot_product_attention"
    prefilter = library_prefilter("NPU306")


CASES = [
    Invalid(
        """\
import os
import torch
import xformers.ops as xops
out = xops.memory_efficient_attention(q, k, v)
""",
    ),
    Valid(
        """\
import os
import torch
out = torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", scale=q.shape[-1] ** -0.5)[0]
""",
    ),
]

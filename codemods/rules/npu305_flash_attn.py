"""NPU305: the flash-attn rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.cudaonly import HUB_FLASH_ATTENTION
from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class FlashAttn(ThirdPartyRule):
    """## What it does

    flash-attn: use torch_npu.npu_fusion_attention (layout, scale, keep_prob and mask spelled out) or SDPA; a flash-attention kernel loaded from the Hugging Face Hub with `kernels.get_kernel("kernels-community/flash-attn3")` is reported at its repo id

    ## Why

    flash-attn's kernels are CUDA-only. torch_npu's `npu_fusion_attention` computes the same attention, but its interface differs in ways that silently change results if copied naively: it returns a 7-tuple (the output first); `scale` defaults to 1.0 instead of 1/sqrt(head_dim); it takes `keep_prob` (probability to keep) instead of `dropout_p`; its boolean `atten_mask` uses **True = masked out** (the opposite of SDPA's boolean mask); causal attention is a 2048x2048 `torch.triu(..., diagonal=1)` boolean mask with `sparse_mode=3` (bottom-right aligned, like flash-attn >= 2.1; `sparse_mode=2` is top-left); the layout is given as a string (`'BSND'` for flash-attn's [batch, seq, heads, head_dim], `'TND'` for the varlen packed form, with `actual_seq_qlen`/`actual_seq_kvlen` as cumulative ends without the leading 0). `torch.nn.functional.scaled_dot_product_attention` is also native on NPU ([batch, heads, seq, head_dim], fp16/bf16/fp32, head_dim <= 512, boolean mask; dropout results differ from GPU). Sources: fact sheet §2.6 (signature, layouts, SDPA limits; `OP@master:docs/zh/custom_APIs/torch_npu/torch_npu-npu_fusion_attention.md`) and the torch_npu API page for `npu_fusion_attention` on hiascend.com (Pytorch 6.0.0 API reference, `ptaoplist_000850`: True in `atten_mask` masks, the `sparse_mode` table, the compressed 2048x2048 mask, the seven outputs, cumulative `actual_seq_qlen`).

    ## Example

    ```python
    import flash_attn
    out = flash_attn.flash_attn_func(q, k, v, dropout_p=0.1, causal=True)    # NPU305

    # instead (q, k, v: [batch, seq, heads, head_dim])
    import torch_npu
    mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
    out = torch_npu.npu_fusion_attention(
        q, k, v, q.shape[2], "BSND", atten_mask=mask, sparse_mode=3,
        scale=q.shape[-1] ** -0.5, keep_prob=1 - 0.1)[0]
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU305]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU305"
    supported_targets = frozenset({"npu", "portable"})
    name = "flash-attn"
    summary = "flash-attn: use torch_npu.npu_fusion_attention (layout, scale, keep_prob and mask spelled out) or SDPA"
    # the library, or a Hugging Face Hub repo id of a flash-attention kernel (`kernels.get_kernel`)
    prefilter = library_prefilter("NPU305") + r"""|["'][\w.-]+/flash[-_]?att"""

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        """`get_kernel("kernels-community/flash-attn3")` (nanochat's FA3 loader): the Hub's
        flash-attention kernels are built for NVIDIA GPUs; said where the file imports Hugging
        Face's `kernels` (which itself loads NPU builds where a repo has them)."""
        value = node.evaluated_value
        if not isinstance(value, str) or not HUB_FLASH_ATTENTION.fullmatch(value) or not any(
                target == "kernels" or target.startswith("kernels.") for target in self.context.facts.aliases.values()):
            return
        self.report(node, f"`{value}` is a Hugging Face Hub flash-attention kernel, built for NVIDIA GPUs (FlashAttention "
                          "targets CUDA), not for Ascend: on NPU give that path "
                          "`torch.nn.functional.scaled_dot_product_attention` or `torch_npu.npu_fusion_attention`")


CASES = [
    Invalid(  # nanochat's flash_attention.py: FA3 from the Hugging Face Hub through `kernels`
        """\
def load():
    from kernels import get_kernel, has_kernel
    hf_kernel = "kernels-community/flash-attn3"
    if has_kernel(hf_kernel):
        return get_kernel(hf_kernel).flash_attn_interface
    return get_kernel("varunneal/flash-attention-3").flash_attn_interface
""",
    ),
    Valid(  # no `kernels` import: a path or a model name that merely says flash-attn
        """\
model_id = "org/flash-attn-benchmark"
""",
    ),
    Invalid(
        """\
    import os
    import torch
    import flash_attn
    out = flash_attn.flash_attn_func(q, k, v, dropout_p=0.1, causal=True)
""",
    ),
    Valid(
        """\
    import os
    import torch
    import torch_npu
    mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
    out = torch_npu.npu_fusion_attention(
        q, k, v, q.shape[2], "BSND", atten_mask=mask, sparse_mode=3,
        scale=q.shape[-1] ** -0.5, keep_prob=1 - 0.1)[0]
""",
    ),
]

"""NPU613 `fused-attention`: `F.scaled_dot_product_attention` becomes `torch_npu.npu_fusion_attention`
with its layout, mask, scale and dropout mapped."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.attention import FUSED as API
from codemods.families.attention import SDPA, Causal, fused_attention, scale_problem
from codemods.families.tune import TuneRule
from codemods.model.cstnodes import bind

PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


class FusedAttention(TuneRule):
    """## What it does

    `F.scaled_dot_product_attention(q, k, v, ...)` on `[batch, heads, seq, head_dim]` tensors
    becomes `torch_npu.npu_fusion_attention(q, k, v, q.shape[1], "BNSD", ...)[0]` with every
    argument mapped:

    | SDPA | npu_fusion_attention |
    |---|---|
    | `[B, N, S, D]` tensors | `input_layout="BNSD"`, `head_num=q.shape[1]` |
    | `scale=None` (1/sqrt(D)) | `scale=1.0 / math.sqrt(q.shape[-1])` (its default is 1) |
    | `scale=s` | `scale=s` |
    | `dropout_p=p` | `keep_prob=1.0 - (p)` |
    | `is_causal=True` (top-left aligned) | `atten_mask=` the 2048x2048 upper triangle, `sparse_mode=2` (leftUpCausal) |
    | `enable_gqa=True` | nothing: fewer key/value heads are grouped natively |
    | result | the first of the seven outputs, `[0]` |

    `attn_mask` is not mapped (SDPA's boolean mask keeps `True` where the fused kernel masks
    `True` out, and a float mask is added after the scale where `pse` is added before it: the
    code does not show which one it gets); a call with one, with an `is_causal` that is not a
    literal, with `*args`, or whose query is not a plain name is reported.

    Opt-in: `npu-migrate apply --enable tune` or `--enable fused-attention`.

    ## Why

    `npu_fusion_attention` is the flash-attention kernel of the NPU (op-plugin's page:
    `attention_out = Dropout(Softmax(Mask(scale * (pse + query key^T), atten_mask)), keep_prob) value`):
    the scores never exist in device memory, forward and backward. torch_npu registers SDPA too,
    but limited to fp16/bf16/fp32 with head dimension up to 512 and a boolean mask, and routes
    other calls to the math path (torch_npu's SDPA registration).

    ## Example

    ```python
    # before
    import torch.nn.functional as F
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
    # after
    import torch.nn.functional as F
    y = torch_npu.npu_fusion_attention(q, k, v, q.shape[1], "BNSD", atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=2, scale=1.0 / math.sqrt(q.shape[-1]), keep_prob=1.0 - (0.1))[0]
    ```

    ## Fix safety

    Unsafe. Without dropout the result is the same attention; the kernel accumulates in its own
    order (measured against the emulation's reference in docs/tune.md). The code does not show
    that `q`, `k`, `v` are 4-D `[B, N, S, D]` with `D` <= 768 and `k`, `v` of one shape (the
    emulation's reference raises otherwise, so `npu-migrate verify` finds it). With dropout, the
    kept elements are drawn by the device's generator, not torch's: train-mode results differ
    from the CUDA run by design, as any dropout on the NPU does.

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix); opt-in; needs torch_npu 2.1 (`target-version`)
    - **portable**: reports only (a torch_npu operator)
    """

    code = "NPU613"
    name = "fused-attention"
    summary = "`F.scaled_dot_product_attention` becomes `torch_npu.npu_fusion_attention` (layout, mask, scale, dropout mapped)"
    prefilter = r"\bscaled_dot_product_attention\b"
    needs_torch_npu = True
    api = API

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.resolve(original_node.func) != SDPA:
            return updated_node
        args, problem = bind(updated_node, PARAMETERS)
        if problem is None:
            problem = _unmapped(args)
        if problem is not None:
            self.report(original_node, f"`scaled_dot_product_attention` stays: {problem}")
            return updated_node
        if self.version_blocks(original_node, f"`{API}`"):
            return updated_node
        causal: Causal | None = "top-left" if args.get("is_causal") == "True" else None
        call = fused_attention(args["query"], args["key"], args["value"], "BNSD", causal, args.get("scale"),
                               args.get("dropout_p"), self.context.require_import)
        self.fixed(original_node, "attention in the fused flash kernel (BNSD layout, SDPA's default scale "
                                  "1/sqrt(D) spelled out" + (", causal as leftUpCausal" if causal else "")
                                  + (", dropout as keep_prob" if "keep_prob" in call else "") + ")")
        return cst.parse_expression(call)


def _unmapped(args: dict[str, str]) -> str | None:
    if not all(n in args for n in ("query", "key", "value")):
        return "query, key and value are not all given"
    if args.get("attn_mask", "None") != "None":
        return ("`attn_mask` (SDPA keeps `True`, the fused kernel masks `True` out; a float mask is added "
                "after the scale, `pse` before it): map it by hand")
    if args.get("is_causal", "False") not in ("True", "False"):
        return "`is_causal` is not a literal: the mask to pass cannot be chosen"
    if args.get("enable_gqa", "False") not in ("True", "False"):
        return "`enable_gqa` is not a literal"
    if not args["query"].isidentifier():
        return "the query is an expression, not a name (it would be evaluated again for its shape)"
    return scale_problem(args.get("scale"))


CASES = [
    Invalid(
        """\
        import torch.nn.functional as F
        def attend(q, k, v, p):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        """,
        after="""\
        import torch_npu  # noqa: F401
        import math
        import torch
        import torch.nn.functional as F
        def attend(q, k, v, p):
            return torch_npu.npu_fusion_attention(q, k, v, q.shape[1], "BNSD", atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=2, scale=1.0 / math.sqrt(q.shape[-1]), keep_prob=1.0 - (p))[0]
        """,
        codes=("NPU613", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(
        """\
        import torch
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.125)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        y = torch_npu.npu_fusion_attention(q, k, v, q.shape[1], "BNSD", scale=0.125)[0]
        """,
        codes=("NPU613", "NPU100"),
        with_rules=("NPU100",),
    ),
    # a mask of unknown kind: reported, kept
    Invalid(
        """\
        import torch.nn.functional as F
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """,
    ),
    # the version gate
    Invalid(
        """\
        import torch.nn.functional as F
        y = F.scaled_dot_product_attention(q, k, v)
        """,
        options=(("target_version", "2.0"),),
    ),
    Valid("import torch\ny = torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n"),
]

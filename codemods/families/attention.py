"""Attention kernels mapped between their interfaces: the text of a
`torch_npu.npu_fusion_attention` or `scaled_dot_product_attention` call that computes the same
attention. Used by NPU305 (flash-attn), NPU306 (xFormers) and NPU613 (SDPA to the fused kernel).

Facts (torch_npu's `npu_fusion_attention` page, reference §2.6): the fused kernel returns a
7-tuple whose first item is the output; its `scale` defaults to 1.0; it takes `keep_prob`, the
probability to keep; its boolean `atten_mask` masks True out; the causal `sparse_mode`s 2
(top-left aligned) and 3 (bottom-right aligned) take the compressed 2048x2048 upper triangle.
SDPA's `scale=None` is 1/sqrt(head_dim), its `is_causal` is top-left aligned and its boolean
`attn_mask` keeps True.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import libcst as cst

from codemods.model.cstnodes import dotted_name

FUSED = "torch_npu.npu_fusion_attention"
SDPA = "torch.nn.functional.scaled_dot_product_attention"
CAUSAL_MASK = "torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device={q}.device), diagonal=1)"
# where the last query row meets the keys when there are more keys than queries
Causal = Literal["top-left", "bottom-right"]
SPARSE_MODE: dict[Causal, int] = {"top-left": 2, "bottom-right": 3}
NO_DROPOUT = ("0", "0.0", "0.")


def reusable(code: str) -> bool:
    """Whether an argument may be written twice (its shape read besides the value): a name or a
    chain of attributes, which evaluates to the same object again."""
    try:
        return dotted_name(cst.parse_expression(code)) is not None
    except cst.ParserSyntaxError:
        return False


def never_none(code: str) -> bool:
    """Whether an argument is a number or arithmetic on numbers and names (`0.125`, `d ** -0.5`),
    which cannot be None; a name, attribute or call may be."""
    try:
        node = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        return False
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    return isinstance(node, (cst.BinaryOperation, cst.UnaryOperation))


def scale_problem(scale: str | None) -> str | None:
    """Why a scale argument cannot be mapped onto the fused kernel's, or None: one that may be
    None at run time is written twice (`s if s is not None else 1/sqrt(D)`), so it must be `reusable`."""
    if scale is None or scale == "None" or never_none(scale) or reusable(scale):
        return None
    return ("the scale is an expression that may be None (1/sqrt(head_dim) by default, 1.0 in "
            "npu_fusion_attention): it would be evaluated twice to choose")


def dropped(dropout: str | None) -> bool:
    return dropout is None or dropout in NO_DROPOUT


def fused_attention(q: str, k: str, v: str, layout: str, causal: Causal | None, scale: str | None,
                    dropout: str | None, require_import: Callable[[str], None],
                    cumulative: tuple[str, str] | None = None) -> str:
    """`torch_npu.npu_fusion_attention(...)[0]` for `layout` ("BNSD", "BSND", or "TND" with
    `cumulative`: the code of the query's and the keys' cumulative sequence lengths as tensors
    with a leading 0, flash-attn's `cu_seqlens`); `scale` None is 1/sqrt(head_dim), `dropout`
    the probability to drop (None: none). `q` must be `reusable`, and so must a `scale` that
    may be None (it is written twice: `s if s is not None else 1/sqrt(D)`)."""
    heads = f"{q}.shape[1]" if layout in ("BNSD", "TND") else f"{q}.shape[2]"
    mapped = [q, k, v, heads, f'"{layout}"']
    if cumulative is not None:  # torch_npu takes host int lists of the ends, without the leading 0
        mapped += [f"actual_seq_qlen={cumulative[0]}[1:].tolist()", f"actual_seq_kvlen={cumulative[1]}[1:].tolist()"]
    if causal is not None:
        mapped += [f"atten_mask={CAUSAL_MASK.format(q=q)}", f"sparse_mode={SPARSE_MODE[causal]}"]
    default = f"1.0 / math.sqrt({q}.shape[-1])"
    if scale is None or scale == "None" or not never_none(scale):
        require_import("math")
    if scale is None or scale == "None":
        scale = default
    elif not never_none(scale):  # a variable may hold None (flash-attn's default), the kernel's default is 1.0
        scale = f"{scale} if {scale} is not None else {default}"
    mapped.append(f"scale={scale}")
    if not dropped(dropout):
        mapped.append(f"keep_prob=1.0 - ({dropout})")
    require_import("torch")
    return f"{FUSED}({', '.join(mapped)})[0]"


def sdpa_from_bsnd(q: str, k: str, v: str, causal: Causal | None, scale: str | None, dropout: str | None,
                   require_import: Callable[[str], None]) -> str:
    """SDPA on [batch, seq, heads, head_dim] tensors (flash-attn's and xFormers' layout), and its
    result in that layout again. `movedim(1, -2)` puts the sequence next to head_dim for 4-D
    tensors and leaves xFormers' 3-D [batch, seq, head_dim] as it is. Bottom-right causal
    (flash-attn >= 2.1) is an explicit boolean mask, True = kept; `q` and `k` must then be
    `reusable`."""
    mapped = [f"{x}.movedim(1, -2)" for x in (q, k, v)]
    if causal == "top-left":
        mapped.append("is_causal=True")
    elif causal == "bottom-right":
        mapped.append(f"attn_mask=torch.ones({q}.shape[1], {k}.shape[1], dtype=torch.bool, "
                      f"device={q}.device).tril({k}.shape[1] - {q}.shape[1])")
    if not dropped(dropout):
        mapped.append(f"dropout_p={dropout}")
    if scale is not None and scale != "None":
        mapped.append(f"scale={scale}")
    require_import("torch")
    return f"{SDPA}({', '.join(mapped)}).movedim(-2, 1)"

"""Reference implementations, in plain torch, of common torch_npu custom operators.

They follow the documented signatures and semantics (OP docs, torch_npu_api.md §2.6) closely
enough to verify code that calls them; they are written for clarity, not speed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._state import EmulationError

_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD")


def _to_bnsd(x: torch.Tensor, layout: str, heads: int | None) -> torch.Tensor:
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if heads is None:
        raise EmulationError(f"npu_fusion_attention: layout {layout} needs the number of heads")
    if layout == "BSH":
        b, s, h = x.shape
        return x.view(b, s, heads, h // heads).transpose(1, 2)
    s, b, h = x.shape  # SBH
    return x.view(s, b, heads, h // heads).permute(1, 2, 0, 3)


def _from_bnsd(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    b, n, s, d = x.shape
    if layout == "BSH":
        return x.transpose(1, 2).reshape(b, s, n * d)
    return x.permute(2, 0, 1, 3).reshape(s, b, n * d)


def _kv_heads(x: torch.Tensor, layout: str, head_dim: int) -> int | None:
    if layout in ("BSH", "SBH"):
        return x.shape[-1] // head_dim
    return None


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                         next_tockens=2147483647, inner_precise=0, prefix=None,
                         actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False):
    """softmax(scale * (QK^T + pse) masked) V, dropout with keep_prob; atten_mask True = masked out.

    Returns the 7-tuple of torch_npu: (attention_out, softmax_max, softmax_sum, softmax_in, seed,
    offset, numels); only attention_out carries meaning here.
    """
    if input_layout not in _LAYOUTS:
        raise EmulationError(f"npu_fusion_attention: input_layout {input_layout!r} is not emulated "
                             f"(emulated: {', '.join(_LAYOUTS)})")
    if sparse_mode not in (0, 1, 2, 3):
        raise EmulationError(f"npu_fusion_attention: sparse_mode={sparse_mode} is not emulated")
    if padding_mask is not None or prefix is not None:
        raise EmulationError("npu_fusion_attention: padding_mask/prefix are not emulated")
    q = _to_bnsd(query, input_layout, head_num)
    head_dim = q.shape[-1]
    k = _to_bnsd(key, input_layout, _kv_heads(key, input_layout, head_dim))
    v = _to_bnsd(value, input_layout, _kv_heads(value, input_layout, head_dim))
    if k.shape[1] != q.shape[1]:  # grouped-query attention: repeat kv heads
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1))
    if pse is not None:
        scores = scores + pse.float()
    scores = scores * scale
    sq, skv = scores.shape[-2], scores.shape[-1]
    masked = _mask(atten_mask, sparse_mode, pre_tockens, next_tockens, sq, skv, scores.device)
    if masked is not None:
        scores = scores.masked_fill(masked, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if keep_prob < 1.0:
        probs = F.dropout(probs, p=1.0 - keep_prob)
    out = torch.matmul(probs, v.float()).to(query.dtype)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_sum = torch.exp(scores - row_max).sum(dim=-1, keepdim=True)
    empty = torch.empty(0, device=query.device)
    return (_from_bnsd(out, input_layout), row_max.expand(*row_max.shape[:-1], 8),
            row_sum.expand(*row_sum.shape[:-1], 8), empty, 0, 0, 0)


def _mask(atten_mask, sparse_mode, pre, nxt, sq, skv, device):
    rows = torch.arange(sq, device=device).unsqueeze(-1)
    cols = torch.arange(skv, device=device).unsqueeze(0)
    if sparse_mode == 2:  # leftUpCausal
        return cols > rows
    if sparse_mode == 3:  # rightDownCausal
        return cols > rows + (skv - sq)
    masked = atten_mask.bool() if atten_mask is not None else None
    if sparse_mode == 0 and (pre < sq + skv or nxt < sq + skv):
        band = (cols < rows - pre) | (cols > rows + nxt)
        masked = band if masked is None else masked | band
    return masked


def npu_rms_norm(x, gamma, epsilon=1e-6):
    """Returns (y, rstd) like torch_npu.npu_rms_norm."""
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + epsilon)
    return (x.float() * rstd).to(x.dtype) * gamma, rstd


def npu_rotary_mul(x, r1, r2, rotary_mode="half"):
    if rotary_mode != "half":
        raise EmulationError(f"npu_rotary_mul: rotary_mode={rotary_mode!r} is not emulated")
    first, second = x.chunk(2, dim=-1)
    return x * r1 + torch.cat((-second, first), dim=-1) * r2


def npu_swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return F.silu(a) * b


def fast_gelu(x):
    # torch_npu documents fast_gelu as x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))
    return x / (1 + torch.exp(-1.702 * x.abs())) * torch.exp(0.851 * (x - x.abs()))


def npu_format_cast(x, acl_format):
    return x  # internal formats do not exist off the device


def get_npu_format(x):
    return 2  # ACL_FORMAT_ND


def npu_confusion_transpose(x, perm, shape, transpose_first):
    return x.permute(*perm).reshape(shape) if transpose_first else x.reshape(shape).permute(*perm)


REFERENCE_OPS = {
    fn.__name__: fn
    for fn in (npu_fusion_attention, npu_rms_norm, npu_rotary_mul, npu_swiglu, fast_gelu,
               npu_format_cast, get_npu_format, npu_confusion_transpose)
}


class UnemulatedOp:
    """Stands for a torch_npu custom operator with no reference implementation: importing the name
    works (so a module can load), calling it raises EmulationError naming the operator."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise EmulationError(
            f"torch_npu.{self.__name__} is a torch_npu custom operator that npu-migrate cannot emulate "
            f"off the device; emulated operators: {', '.join(sorted(REFERENCE_OPS))}")

    def __repr__(self) -> str:
        return f"<unemulated torch_npu operator {self.__name__}>"


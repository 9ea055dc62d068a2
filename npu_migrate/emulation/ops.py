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
    offset, numels); only attention_out carries meaning here. TND (varlen): query [T, N, D] packs
    the sequences one after the other, `actual_seq_qlen`/`actual_seq_kvlen` are their cumulative
    ends (no leading 0), each sequence attends only to its own keys.
    """
    if input_layout not in _LAYOUTS + ("TND",):
        raise EmulationError(f"npu_fusion_attention: input_layout {input_layout!r} is not emulated "
                             f"(emulated: {', '.join(_LAYOUTS)}, TND)")
    if sparse_mode not in (0, 1, 2, 3):
        raise EmulationError(f"npu_fusion_attention: sparse_mode={sparse_mode} is not emulated")
    if padding_mask is not None or prefix is not None:
        raise EmulationError("npu_fusion_attention: padding_mask/prefix are not emulated")
    if input_layout == "TND":
        return _varlen(query, key, value, pse, atten_mask, scale, keep_prob, pre_tockens, next_tockens,
                       actual_seq_qlen, actual_seq_kvlen, sparse_mode)
    q = _to_bnsd(query, input_layout, head_num)
    head_dim = q.shape[-1]
    k = _to_bnsd(key, input_layout, _kv_heads(key, input_layout, head_dim))
    v = _to_bnsd(value, input_layout, _kv_heads(value, input_layout, head_dim))
    out, row_max, row_sum = _attend(q, k, v, pse, atten_mask, scale, keep_prob, pre_tockens, next_tockens, sparse_mode)
    empty = torch.empty(0, device=query.device)
    return (_from_bnsd(out.to(query.dtype), input_layout), row_max.expand(*row_max.shape[:-1], 8),
            row_sum.expand(*row_sum.shape[:-1], 8), empty, 0, 0, 0)


def _attend(q, k, v, pse, atten_mask, scale, keep_prob, pre, nxt, sparse_mode):
    """(out in float32, row max, row sum) of attention on [B, N, S, D]; fewer key/value heads
    are grouped."""
    if k.shape[1] != q.shape[1]:  # grouped-query attention: repeat kv heads
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1))
    if pse is not None:
        scores = scores + pse.float()
    scores = scores * scale
    sq, skv = scores.shape[-2], scores.shape[-1]
    masked = _mask(atten_mask, sparse_mode, pre, nxt, sq, skv, scores.device)
    if masked is not None:
        scores = scores.masked_fill(masked, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if keep_prob < 1.0:
        probs = F.dropout(probs, p=1.0 - keep_prob)
    row_max = scores.amax(dim=-1, keepdim=True)
    return torch.matmul(probs, v.float()), row_max, torch.exp(scores - row_max).sum(dim=-1, keepdim=True)


def _varlen(query, key, value, pse, atten_mask, scale, keep_prob, pre, nxt, qlen, kvlen, sparse_mode):
    """TND: each packed sequence on its own, [T, N, D] in and out. The causal modes align per
    sequence (torch_npu's varlen sparse_mode 2/3); an explicit mask or pse per sequence is not
    emulated."""
    if qlen is None or kvlen is None:
        raise EmulationError("npu_fusion_attention: layout TND needs actual_seq_qlen and actual_seq_kvlen")
    if query.dim() != 3 or key.dim() != 3:
        raise EmulationError(f"npu_fusion_attention: layout TND needs 3-D [T, N, D] tensors, got {query.dim()}-D")
    if pse is not None or (sparse_mode not in (2, 3) and atten_mask is not None):
        raise EmulationError("npu_fusion_attention: TND with pse or a mask other than the causal modes' is not emulated")
    ends_q, ends_kv = [int(n) for n in qlen], [int(n) for n in kvlen]
    if len(ends_q) != len(ends_kv) or ends_q != sorted(ends_q) or ends_kv != sorted(ends_kv) \
            or not ends_q or ends_q[-1] != query.shape[0] or ends_kv[-1] != key.shape[0]:
        raise EmulationError(f"npu_fusion_attention: actual_seq_qlen {ends_q} / actual_seq_kvlen {ends_kv} are not "
                             f"ascending cumulative ends of {query.shape[0]} / {key.shape[0]} tokens (one per sequence)")
    outs, maxes, sums = [], [], []
    for (q0, q1), (k0, k1) in zip(zip([0, *ends_q], ends_q), zip([0, *ends_kv], ends_kv), strict=True):
        q, k, v = (x.transpose(0, 1).unsqueeze(0) for x in (query[q0:q1], key[k0:k1], value[k0:k1]))
        out, row_max, row_sum = _attend(q, k, v, None, None, scale, keep_prob, pre, nxt, sparse_mode)
        outs.append(out[0].transpose(0, 1))
        maxes.append(row_max[0].transpose(0, 1))
        sums.append(row_sum[0].transpose(0, 1))
    row_max, row_sum = torch.cat(maxes), torch.cat(sums)
    return (torch.cat(outs).to(query.dtype), row_max.expand(*row_max.shape[:-1], 8),
            row_sum.expand(*row_sum.shape[:-1], 8), torch.empty(0, device=query.device), 0, 0, 0)


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


"""The attention routes prove their numbers: flash-attn's functional API (NPU305) and xFormers'
memory_efficient_attention (NPU306) are run as written, against reference implementations of
them in plain torch (the libraries do not install here), and as rewritten, under the emulation
on the npu device; float32 results agree within float32 rounding, causal or not, for either
target."""

from __future__ import annotations

import math
import sys
import textwrap
import types

import pytest
import torch

from npu_migrate import emulation
from tests.rules.rule_cases import migrate


def _attention(q, k, v, scale, masked):
    """softmax(scale * q k^T, masked out) v on [B, N, S, D]."""
    scores = (q @ k.transpose(-2, -1)) * scale
    if masked is not None:
        scores = scores.masked_fill(masked, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn 2's documented semantics: [B, S, N, D]; fewer key/value heads are grouped;
    causal is aligned to the bottom-right corner of the score matrix."""
    assert dropout_p == 0.0 and window_size == (-1, -1) and not return_attn_probs
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    k, v = (x.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for x in (k, v))
    sq, sk = q.shape[2], k.shape[2]
    masked = torch.ones(sq, sk, dtype=torch.bool).triu(sk - sq + 1) if causal else None
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return _attention(q, k, v, scale, masked).transpose(1, 2)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False):
    return flash_attn_func(*qkv.unbind(2), dropout_p, softmax_scale, causal)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False):
    return flash_attn_func(q, *kv.unbind(2), dropout_p, softmax_scale, causal)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash-attn 2's varlen semantics: [total, N, D] packed sequences, `cu_seqlens` their
    cumulative starts with a leading 0 (int32 tensors); each sequence is flash_attn_func on its own
    (bottom-right causal per sequence)."""
    assert max(cu_seqlens_q.diff()) <= max_seqlen_q and max(cu_seqlens_k.diff()) <= max_seqlen_k
    outs = []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(bounds_q) - 1):
        one = [x[None, a:b] for x, (a, b) in ((q, bounds_q[i:i + 2]), (k, bounds_k[i:i + 2]), (v, bounds_k[i:i + 2]))]
        outs.append(flash_attn_func(*one, dropout_p, softmax_scale, causal)[0])
    return torch.cat(outs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False):
    return flash_attn_varlen_func(*qkv.unbind(1), cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p,
                                  softmax_scale, causal)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False):
    return flash_attn_varlen_func(q, *kv.unbind(1), cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  dropout_p, softmax_scale, causal)


class LowerTriangularMask:
    """xFormers' causal bias: aligned to the top-left corner."""


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None):
    """xFormers' documented semantics: [B, M, H, K], or [B, M, K] with one head."""
    assert p == 0.0
    three = query.dim() == 3
    q, k, v = (x.unsqueeze(2) if three else x for x in (query, key, value))
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    sq, sk = q.shape[2], k.shape[2]
    masked = torch.ones(sq, sk, dtype=torch.bool).triu(1) if isinstance(attn_bias, LowerTriangularMask) else None
    out = _attention(q, k, v, scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]), masked).transpose(1, 2)
    return out.squeeze(2) if three else out


def _libraries() -> dict[str, types.ModuleType]:
    """The reference implementations, importable under the libraries' own names."""
    flash = types.ModuleType("flash_attn")
    for fn in (flash_attn_func, flash_attn_qkvpacked_func, flash_attn_kvpacked_func, flash_attn_varlen_func,
               flash_attn_varlen_qkvpacked_func, flash_attn_varlen_kvpacked_func):
        setattr(flash, fn.__name__, fn)
    xformers, ops = types.ModuleType("xformers"), types.ModuleType("xformers.ops")
    ops.memory_efficient_attention, ops.LowerTriangularMask = memory_efficient_attention, LowerTriangularMask
    xformers.ops = ops
    return {"flash_attn": flash, "xformers": xformers, "xformers.ops": ops}


ATTEND = {  # the program as written; `attend(q, k, v)` on [B, S, N, D] (or [B, S, D])
    "flash causal": "from flash_attn import flash_attn_func\n"
                    "def attend(q, k, v):\n    return flash_attn_func(q, k, v, causal=True)\n",
    "flash scaled": "import flash_attn\n"
                    "def attend(q, k, v):\n    return flash_attn.flash_attn_func(q, k, v, 0.0, 0.3, False)\n",
    "flash qkvpacked causal": "from flash_attn import flash_attn_qkvpacked_func\n"
                              "def attend(q, k, v):\n    qkv = torch.stack([q, q.flip(1), q * 2], dim=2)\n"
                              "    return flash_attn_qkvpacked_func(qkv, causal=True)\n",
    "flash kvpacked": "from flash_attn import flash_attn_kvpacked_func\n"
                      "def attend(q, k, v):\n    kv = torch.stack([k, v], dim=2)\n"
                      "    return flash_attn_kvpacked_func(q, kv, softmax_scale=0.2)\n",
    "xformers causal": "import xformers.ops as xops\n"
                       "def attend(q, k, v):\n"
                       "    return xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())\n",
    "xformers scaled": "from xformers.ops import memory_efficient_attention\n"
                       "def attend(q, k, v):\n    return memory_efficient_attention(q, k, v, None, 0.0, 0.25)\n",
}
SHAPES = {  # (query, key/value): fewer queries than keys shows the causal alignment
    "flash causal": ((2, 5, 4, 8), (2, 9, 2, 8)),  # grouped key/value heads (npu target only)
    "flash scaled": ((2, 6, 3, 16), (2, 6, 3, 16)),
    "flash qkvpacked causal": ((2, 7, 2, 8), (2, 7, 2, 8)),
    "flash kvpacked": ((1, 4, 2, 8), (1, 6, 2, 8)),
    "xformers causal": ((2, 5, 3, 8), (2, 9, 3, 8)),
    "xformers scaled": ((3, 6, 16), (3, 7, 16)),  # the 3-D form
}


def _run(src: str, q, k, v, libraries: dict[str, types.ModuleType] | None = None, *lengths) -> torch.Tensor:
    namespace: dict[str, object] = {"torch": torch}
    saved = {name: sys.modules.get(name) for name in libraries or {}}
    sys.modules.update(libraries or {})
    try:
        exec(compile("import torch\n" + src, "<attend>", "exec"), namespace)
        return namespace["attend"](q, k, v, *lengths)  # type: ignore[operator]
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("case", list(ATTEND))
def test_the_rewritten_attention_matches_the_original(case: str, target: str) -> None:
    if target == "portable" and case == "flash causal":
        pytest.skip("SDPA needs as many key/value heads as query heads (its docs; the rule's Fix safety)")
    src = ATTEND[case]
    outcome = migrate(src, None, "model.py", options={"target": target})
    rewritten = outcome.new_text
    assert rewritten is not None, [d.message for d in outcome.diagnostics]
    assert "flash_attn" not in rewritten and "xformers" not in rewritten  # the imports went with the calls
    expected = "npu_fusion_attention" if target == "npu" and case.startswith("flash") else "scaled_dot_product_attention"
    assert expected in rewritten
    q_shape, kv_shape = SHAPES[case]
    draw = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=draw) for shape in (q_shape, kv_shape, kv_shape))
    original = _run(src, q, k, v, _libraries())
    with emulation.emulated():  # without the libraries: the rewritten program must not need them
        ours = _run(rewritten, q.to("npu"), k.to("npu"), v.to("npu")).cpu()
    assert ours.shape == original.shape
    torch.testing.assert_close(ours, original, rtol=1e-5, atol=1e-5)


def test_the_causal_alignments_differ_where_the_lengths_do() -> None:
    """The cases above could pass with either alignment only if the lengths were equal: with
    fewer queries than keys, flash-attn's bottom-right and xFormers' top-left causal differ."""
    q, k = torch.randn(1, 3, 1, 8), torch.randn(1, 6, 1, 8)
    bottom_right = flash_attn_func(q, k, k, causal=True)
    top_left = memory_efficient_attention(q, k, k, LowerTriangularMask())
    assert not torch.allclose(bottom_right, top_left)


VARLEN = {  # `attend(q, k, v, cu_q, cu_k)` on packed [total, N, D]; the lengths as flash-attn takes them
    "varlen causal": "from flash_attn import flash_attn_varlen_func\n"
                     "def attend(q, k, v, cu_q, cu_k):\n"
                     "    return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 9, causal=True)\n",
    "varlen scaled": "import flash_attn\n"
                     "def attend(q, k, v, cu_q, cu_k):\n"
                     "    return flash_attn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 9, 0.0, 0.3)\n",
    "varlen scale variable": "from flash_attn import flash_attn_varlen_func\n"  # None at run time: 1/sqrt(D)
                             "def attend(q, k, v, cu_q, cu_k, softmax_scale=None):\n"
                             "    return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 9, softmax_scale=softmax_scale)\n",
    "varlen kvpacked causal": "from flash_attn import flash_attn_varlen_kvpacked_func\n"
                              "def attend(q, k, v, cu_q, cu_k):\n    kv = torch.stack([k, v], dim=1)\n"
                              "    return flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, 9, 9, softmax_scale=0.2, causal=True)\n",
    "varlen qkvpacked causal": "from flash_attn import flash_attn_varlen_qkvpacked_func\n"
                               "def attend(q, k, v, cu_q, cu_k):\n    qkv = torch.stack([q, q.flip(0), q * 2], dim=1)\n"
                               "    return flash_attn_varlen_qkvpacked_func(qkv, cu_q, 9, causal=True)\n",
}


@pytest.mark.parametrize("case", list(VARLEN))
def test_the_rewritten_varlen_attention_matches_the_original(case: str) -> None:
    """Three packed sequences; the queries are shorter than the keys in two of them (their
    causal alignment shows), and grouped key/value heads; the packed forms take equal lengths."""
    src = VARLEN[case]
    rewritten = migrate(src, None, "model.py").new_text
    assert rewritten is not None and "flash_attn" not in rewritten and '"TND"' in rewritten
    assert "actual_seq_qlen=cu_q[1:].tolist()" in rewritten  # torch_npu's ends, no leading 0
    draw = torch.Generator().manual_seed(1)
    packed = "qkvpacked" in case
    cu_q = torch.tensor([0, 3, 5, 9] if packed else [0, 2, 5, 9], dtype=torch.int32)
    cu_k = torch.tensor([0, 3, 5, 9] if packed else [0, 4, 8, 12], dtype=torch.int32)
    heads_kv = 4 if packed or "kvpacked" in case else 2
    q = torch.randn(int(cu_q[-1]), 4, 8, generator=draw)
    k, v = (torch.randn(int(cu_k[-1]), heads_kv, 8, generator=draw) for _ in range(2))
    original = _run(src, q, k, v, _libraries(), cu_q, cu_k)
    with emulation.emulated():
        ours = _run(rewritten, q.to("npu"), k.to("npu"), v.to("npu"), None, cu_q.to("npu"), cu_k.to("npu")).cpu()
    assert ours.shape == original.shape == q.shape
    torch.testing.assert_close(ours, original, rtol=1e-5, atol=1e-5)


def test_the_varlen_reference_is_not_one_long_sequence() -> None:
    """Packing matters: attention over the packed tokens as one sequence gives other numbers,
    so the test above checks that the lengths reach the fused kernel."""
    q = torch.randn(6, 1, 8)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    assert not torch.allclose(flash_attn_varlen_func(q, q, q, cu, cu, 4, 4), flash_attn_func(q[None], q[None], q[None])[0])


def test_varlen_stays_under_portable_and_says_why() -> None:
    src = VARLEN["varlen causal"]
    outcome = migrate(src, None, "model.py", options={"target": "portable"})
    assert outcome.new_text is None
    errors = [d.message for d in outcome.diagnostics if d.severity.value == "error" and d.code == "NPU305"]
    assert len(errors) == 1 and "SDPA has no form for packed variable-length sequences" in errors[0]


UNMAPPED = {
    "window_size=(128, 0)": "sliding-window",
    "softcap=30.0": "softcap",
    "alibi_slopes=slopes": "ALiBi",
    "return_attn_probs=True": "softmax_lse",
    "causal=is_causal": "not a literal",
    "block_table=pages": "paged key/value cache",
}


@pytest.mark.parametrize("argument", list(UNMAPPED))
def test_an_argument_without_an_exact_route_keeps_the_call_and_says_why(argument: str) -> None:
    call = "flash_attn_varlen_func(q, k, v, cu, cu, 8, 8" if "block_table" in argument else "flash_attn_func(q, k, v"
    src = f"from flash_attn import {call.split('(')[0]}\nout = {call}, {argument})\n"
    outcome = migrate(src, None, "model.py")
    assert outcome.new_text is None
    errors = [d for d in outcome.diagnostics if d.severity.value == "error" and d.code == "NPU305"]
    assert len(errors) == 1 and UNMAPPED[argument] in errors[0].message, [d.message for d in outcome.diagnostics]


def test_a_name_bound_twice_is_not_taken_for_flash_attn() -> None:
    """`except ImportError: flash_attn_func = None`: the name may be None, so the call behind the
    guard is not resolved as flash-attn's and nothing is rewritten; the import is reported."""
    src = textwrap.dedent("""\
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        def attend(q, k, v):
            if flash_attn_func is not None:
                return flash_attn_func(q, k, v)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        """)
    outcome = migrate(src, None, "model.py")
    assert outcome.new_text is None
    assert [d.line for d in outcome.diagnostics if d.code == "NPU305"] == [2]

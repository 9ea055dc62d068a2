"""NPU305: the flash-attn rule."""

from __future__ import annotations


import libcst as cst

from codemods.analyses.cudaonly import HUB_FLASH_ATTENTION
from codemods.api.cases import Invalid, Valid
from codemods.api.targets import too_old, version_allows
from codemods.families.attention import FUSED, Causal, fused_attention, reusable, scale_problem, sdpa_from_bsnd
from codemods.families.routes import RequireImport, RoutedCallRule, call_routes, keyword_problem
from codemods.families.third_party import library_prefilter
from codemods.model.cstnodes import bind

# the routed functions, their parameters and the keywords that map only at some values:
# codemods/data/routes.json (a new flash-attn version is a data change)
ROUTES = call_routes("flash-attn")
FUNCTIONS: dict[str, tuple[str, ...]] = {name: tuple(f["parameters"]) for name, f in ROUTES["functions"].items()}
MODULES: tuple[str, ...] = tuple(ROUTES["modules"])


def routed_name(qualified: str | None) -> str | None:
    """`flash_attn_func` for flash_attn.flash_attn_func (or through flash_attn_interface)."""
    if qualified is None:
        return None
    module, _, name = qualified.rpartition(".")
    return name if module in MODULES and name in FUNCTIONS else None


class FlashAttn(RoutedCallRule):
    """## What it does

    flash-attn's functional API (`flash_attn_func`, `flash_attn_kvpacked_func`,
    `flash_attn_qkvpacked_func`) becomes `torch_npu.npu_fusion_attention(..., "BSND")[0]`
    (target npu) or `scaled_dot_product_attention` with the sequence moved next to head_dim
    (target portable), every argument mapped; its varlen form (`flash_attn_varlen_func`,
    `flash_attn_varlen_kvpacked_func`, `flash_attn_varlen_qkvpacked_func`) becomes
    `torch_npu.npu_fusion_attention(..., "TND", actual_seq_qlen=cu_seqlens_q[1:].tolist(),
    actual_seq_kvlen=cu_seqlens_k[1:].tolist())[0]` (target npu; SDPA has no packed form, so
    under portable it stays, reported). An import whose every use was rewritten goes. A
    call whose arguments cannot be mapped exactly stays and is reported (error) with the reason;
    other flash-attn imports and calls (the modules, the kv-cache API) are reported with
    their route, and so is a flash-attention kernel loaded from the Hugging Face Hub with
    `kernels.get_kernel("kernels-community/flash-attn3")`.

    | flash-attn | npu_fusion_attention | SDPA |
    |---|---|---|
    | `q, k, v` `[B, S, N, D]` | `input_layout="BSND"`, `head_num=q.shape[2]` | `x.movedim(1, -2)`, result `.movedim(-2, 1)` |
    | `qkv` `[B, S, 3, N, D]` / `kv` `[B, S, 2, N, D]` | `qkv[:, :, 0]`, ... | the same |
    | varlen `q, k, v` `[T, N, D]` (packed) | `input_layout="TND"`, `head_num=q.shape[1]` | stays (no packed form) |
    | varlen `cu_seqlens_q`, `cu_seqlens_k` (int32 tensors, leading 0) | `actual_seq_qlen=cu_seqlens_q[1:].tolist()`, `actual_seq_kvlen=cu_seqlens_k[1:].tolist()` (host int lists of the cumulative ends) | |
    | varlen `qkv` `[T, 3, N, D]`, `cu_seqlens` | `qkv[:, 0]`, ...; `cu_seqlens` for both lengths | |
    | varlen `max_seqlen_q`, `max_seqlen_k` | dropped (the kernel reads the lengths) | |
    | `softmax_scale=None` (1/sqrt(D)) | `scale=1.0 / math.sqrt(q.shape[-1])` (its default is 1) | `scale` left out |
    | `dropout_p=p` | `keep_prob=1.0 - (p)` | `dropout_p=p` |
    | `causal=True` (bottom-right aligned, flash-attn >= 2.1) | 2048x2048 `atten_mask`, `sparse_mode=3` | boolean `attn_mask` `.tril(Sk - Sq)` (`is_causal=True` for qkvpacked) |
    | `deterministic` | dropped (a backward choice) | dropped |
    | result | `[0]` of the seven outputs | the tensor |

    Left as written and reported: `window_size` other than `(-1, -1)`, `softcap`, `alibi_slopes`,
    `return_attn_probs=True`, a paged `block_table`, a qkvpacked varlen `cu_seqlens` that is not a
    name (it is written twice), a `causal` that is not a literal, `*args`, positional arguments
    after `causal` (their order changed in flash-attn 2.6), and a query (or packed tensor) that
    is not a name (it would be evaluated again for its shape). A call in a branch that a CUDA test
    selects (`if q.is_cuda:`) stays as written: CUDA machines keep flash-attn, the NPU takes the
    authors' other branch.

    ## Why

    flash-attn's kernels are CUDA-only. torch_npu's `npu_fusion_attention` computes the same attention, but its interface differs in ways that silently change results if copied naively: it returns a 7-tuple (the output first); `scale` defaults to 1.0 instead of 1/sqrt(head_dim); it takes `keep_prob` (probability to keep) instead of `dropout_p`; its boolean `atten_mask` uses **True = masked out** (the opposite of SDPA's boolean mask); causal attention is a 2048x2048 `torch.triu(..., diagonal=1)` boolean mask with `sparse_mode=3` (bottom-right aligned, like flash-attn >= 2.1; `sparse_mode=2` is top-left); the layout is given as a string (`'BSND'` for flash-attn's [batch, seq, heads, head_dim], `'TND'` for the varlen packed form, with `actual_seq_qlen`/`actual_seq_kvlen` as cumulative ends without the leading 0). `torch.nn.functional.scaled_dot_product_attention` is also native on NPU ([batch, heads, seq, head_dim], fp16/bf16/fp32, head_dim <= 512, boolean mask; dropout results differ from GPU). Sources: fact sheet §2.6 (signature, layouts, SDPA limits; `OP@master:docs/zh/custom_APIs/torch_npu/torch_npu-npu_fusion_attention.md`) and the torch_npu API page for `npu_fusion_attention` on hiascend.com (Pytorch 6.0.0 API reference, `ptaoplist_000850`: True in `atten_mask` masks, the `sparse_mode` table, the compressed 2048x2048 mask, the seven outputs, cumulative `actual_seq_qlen`). The varlen form maps onto the TND layout: torch_npu's `actual_seq_qlen`/`actual_seq_kvlen` are `int[]` (host lists) of the cumulative ends without flash-attn's leading 0, so the rewrite writes `cu_seqlens[1:].tolist()` (one device-to-host copy per call; keep the lengths as a host list beside the tensor to avoid it); in varlen the causal sparse modes apply per sequence. SDPA has no packed sequences: under portable the varlen calls stay.

    ## Example

    ```python
    # before
    from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, dropout_p=0.1, causal=True)    # NPU305

    # after (target npu; the engine adds `import torch_npu` and `import math`)
    out = torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=3, scale=1.0 / math.sqrt(q.shape[-1]), keep_prob=1.0 - (0.1))[0]
    ```

    ## Fix safety

    Unsafe. Without dropout the result is the same attention in another kernel's accumulation
    order (tests/rules/test_attention_routes.py runs a reference flash_attn_func against the
    rewritten call under the emulation: float32, causal or not, within 1e-5; the varlen forms
    against a per-sequence reference, three packed sequences of unequal lengths, the same way). The code does not
    show the tensors' shapes: flash-attn before 2.1 aligned causal top-left (the same only when
    the query and key lengths are equal); a query row with no key to see (causal, more queries
    than keys) is zero in flash-attn, NaN under SDPA, and an "invalid row" the fused kernel
    detects itself (its page: sparse_mode=3 with Sq > Skv); float32 inputs need a torch_npu whose
    page lists FLOAT32 for the fused kernel (the 6.0.0 page does, the CANN 7.0.0 one lists
    float16/bfloat16 only); SDPA needs as many key/value heads as
    query heads (it raises otherwise), npu_fusion_attention groups them. Dropout draws from the
    device's generator: train-mode results differ from the CUDA run by design.

    ## Targets

    - **npu**: rewrites to `torch_npu.npu_fusion_attention` (unsafe fix); needs torch_npu 2.1 (`target-version`)
    - **portable**: rewrites to `torch.nn.functional.scaled_dot_product_attention` (unsafe fix)
    """

    code = "NPU305"
    supported_targets = frozenset({"npu", "portable"})
    name = "flash-attn"
    summary = ("flash-attn's functional API becomes torch_npu.npu_fusion_attention or SDPA (layout, scale, dropout and "
               "causal mapped); the rest of flash-attn is reported with its route")
    needs_torch_npu = True
    library = "flash-attn"
    modules = MODULES
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

    def routed(self, qualified: str | None) -> str | None:
        return routed_name(qualified)

    def route(self, node: cst.Call, function: str, require_import: RequireImport) -> tuple[str | None, str]:
        parameters = FUNCTIONS[function]
        args, problem = bind(node, parameters, tuple(ROUTES["keywords"]))
        if problem is not None:
            return None, problem
        missing = [p for p in parameters[:parameters.index("dropout_p")] if p not in args]
        if missing:
            return None, f"{', '.join(missing)} not given"
        problem = keyword_problem(args, ROUTES["keywords"])
        if problem is not None:
            return None, problem
        causal = args.get("causal", "False")
        if causal not in ("True", "False"):
            return None, "`causal` is not a literal: the mask to pass cannot be chosen"
        varlen = ROUTES["functions"][function]["layout"] == "TND"
        q, k, v = _unpacked(varlen, args)
        first = args.get("qkv") or args.get("q", "")
        # one packed tensor: as many queries as keys, where both alignments agree
        alignment: Causal | None = None if causal == "False" else "top-left" if "qkv" in args else "bottom-right"
        if not reusable(first) or ("kv" in args and not reusable(args["kv"])):
            return None, "the query (or packed tensor) is an expression, not a name: it would be evaluated again for its shape"
        if varlen and self.target != "npu":
            return None, ("SDPA has no form for packed variable-length sequences: the npu target routes "
                          f"`{function}` to `{FUSED}` (TND layout)")
        cumulative = _cumulative(args) if varlen else None
        if varlen and cumulative is None:
            return None, "`cu_seqlens` is an expression, not a name: it would be evaluated twice"
        if self.target == "npu":
            problem = scale_problem(args.get("softmax_scale"))
            if problem is not None:
                return None, problem
            if not version_allows(self.context.options, FUSED):
                return None, too_old(self.context.options, FUSED)
            layout = "TND" if varlen else "BSND"
            call = fused_attention(q, k, v, layout, alignment, args.get("softmax_scale"), args.get("dropout_p"),
                                   require_import, cumulative)
            return call, (f"`{FUSED}` ({layout} layout"
                          + (", cu_seqlens as host lists of the cumulative ends without the leading 0" if varlen else "")
                          + ", default scale 1/sqrt(D) spelled out"
                          + (f", causal as sparse_mode={3 if alignment == 'bottom-right' else 2}" if alignment else "")
                          + (", dropout as keep_prob" if "keep_prob" in call else "") + ")")
        if alignment == "bottom-right" and not reusable(k):
            return None, "the key is an expression, not a name: the causal mask reads its length"
        call = sdpa_from_bsnd(q, k, v, alignment, args.get("softmax_scale"), args.get("dropout_p"), require_import)
        return call, "`torch.nn.functional.scaled_dot_product_attention` on [batch, heads, seq, head_dim] views" + (
            " (bottom-right causal as a boolean mask)" if alignment == "bottom-right" else "")


def _unpacked(varlen: bool, args: dict[str, str]) -> tuple[str, str, str]:
    """q, k, v as code: a packed tensor's [B, S, 3 or 2, N, D] (varlen: [T, 3 or 2, N, D])
    slices are views, no copy."""
    at = "[:, {}]" if varlen else "[:, :, {}]"
    if "qkv" in args:
        qkv = args["qkv"]
        return qkv + at.format(0), qkv + at.format(1), qkv + at.format(2)
    if "kv" in args:
        return args["q"], args["kv"] + at.format(0), args["kv"] + at.format(1)
    return args["q"], args["k"], args["v"]


def _cumulative(args: dict[str, str]) -> tuple[str, str] | None:
    """The code of the query's and the keys' `cu_seqlens`; None where one tensor serves both
    (qkvpacked) and is an expression that would be evaluated twice."""
    if "cu_seqlens" in args:
        return (args["cu_seqlens"],) * 2 if reusable(args["cu_seqlens"]) else None
    return args["cu_seqlens_q"], args["cu_seqlens_k"]


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
    Invalid(  # causal is bottom-right aligned (flash-attn >= 2.1): sparse_mode 3; the import goes
        """\
        import torch
        from flash_attn import flash_attn_func
        def attend(q, k, v, p):
            return flash_attn_func(q, k, v, dropout_p=p, causal=True)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        import math

        def attend(q, k, v, p):
            return torch_npu.npu_fusion_attention(q, k, v, q.shape[2], "BSND", atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=3, scale=1.0 / math.sqrt(q.shape[-1]), keep_prob=1.0 - (p))[0]
        """,
        codes=("NPU305", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(  # portable: SDPA on [B, N, S, D] views, the bottom-right causal mask spelled out; the module import goes
        """\
        import torch
        import flash_attn
        out = flash_attn.flash_attn_func(q, k, v, 0.0, 0.125, True)
        """,
        after="""\
        import torch

        out = torch.nn.functional.scaled_dot_product_attention(q.movedim(1, -2), k.movedim(1, -2), v.movedim(1, -2), attn_mask=torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device=q.device).tril(k.shape[1] - q.shape[1]), scale=0.125).movedim(-2, 1)
        """,
        options=(("target", "portable"),),
    ),
    Invalid(  # a packed tensor: its slices are views; one length, so top-left causal is the same
        """\
        import torch
        from flash_attn.flash_attn_interface import flash_attn_qkvpacked_func
        out = flash_attn_qkvpacked_func(qkv, causal=True, softmax_scale=0.1)
        """,
        after="""\
        import torch

        out = torch.nn.functional.scaled_dot_product_attention(qkv[:, :, 0].movedim(1, -2), qkv[:, :, 1].movedim(1, -2), qkv[:, :, 2].movedim(1, -2), is_causal=True, scale=0.1).movedim(-2, 1)
        """,
        options=(("target", "portable"),),
    ),
    Invalid(  # varlen: the TND layout; torch_npu takes the cumulative ends without the leading 0 as host lists
        """\
        import torch
        from flash_attn import flash_attn_varlen_func
        def attend(q, k, v, cu_q, cu_k, max_q, max_k):
            return flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=0.125, causal=True)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401

        def attend(q, k, v, cu_q, cu_k, max_q, max_k):
            return torch_npu.npu_fusion_attention(q, k, v, q.shape[1], "TND", actual_seq_qlen=cu_q[1:].tolist(), actual_seq_kvlen=cu_k[1:].tolist(), atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=3, scale=0.125)[0]
        """,
        codes=("NPU305", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(  # varlen qkvpacked: one cu_seqlens for both lengths, the packed [T, 3, N, D] sliced
        """\
        import torch
        import flash_attn
        out = flash_attn.flash_attn_varlen_qkvpacked_func(qkv, batch.cu_seqlens, batch.max_seqlen, 0.1)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        import math

        out = torch_npu.npu_fusion_attention(qkv[:, 0], qkv[:, 1], qkv[:, 2], qkv[:, 0].shape[1], "TND", actual_seq_qlen=batch.cu_seqlens[1:].tolist(), actual_seq_kvlen=batch.cu_seqlens[1:].tolist(), scale=1.0 / math.sqrt(qkv[:, 0].shape[-1]), keep_prob=1.0 - (0.1))[0]
        """,
        codes=("NPU305", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(  # portable: SDPA has no packed form, the varlen call and its import stay, an error says why
        """\
        from flash_attn import flash_attn_varlen_func
        out = flash_attn_varlen_func(q, k, v, cu, cu, 128, 128, causal=True)
        """,
        options=(("target", "portable"),),
        lines=(1, 2),
    ),
    Invalid(  # a paged kv-cache has no route: stays, error
        """\
        from flash_attn import flash_attn_varlen_func
        out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1, 4096, block_table=pages)
        """,
        lines=(1, 2),
    ),
    Invalid(  # sliding-window attention has no exact route: the call and its import stay, an error says why
        """\
        from flash_attn import flash_attn_func
        out = flash_attn_func(q, k, v, causal=True, window_size=(256, 0))
        """,
    ),
    Invalid(  # a guard into flash-attn's compiled CUDA module: the import is reported, the guard and call stay
        """\
        import torch
        import flash_attn_2_cuda
        def attend(q, k, v):
            if q.is_cuda:
                return flash_attn_2_cuda.fwd(q, k, v, None, None, 0.0, 0.125, False, -1, -1, False, None)[0]
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        """,
    ),
    Invalid(  # a CUDA guard in front of flash-attn: CUDA keeps it, the NPU takes the fallback; the import is reported
        """\
        import torch
        from flash_attn import flash_attn_func
        def attend(q, k, v):
            if q.is_cuda:
                return flash_attn_func(q, k, v, causal=True)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        """,
    ),
    Valid(  # a kernel selector and log text that name flash-attn are neither calls nor imports
        """\
        import logging
        ATTENTION = {"flash_attn": "flash_attn_func", "varlen": "flash_attn_varlen_func", "sdpa": "scaled_dot_product_attention"}
        def choose(impl="flash_attn"):
            logging.info("attention: flash_attn_func(q, k, v, causal=True) if %s", impl)
            return ATTENTION[impl]
        """,
    ),
]

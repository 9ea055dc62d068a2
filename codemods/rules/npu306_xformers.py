"""NPU306: the xformers rule."""

from __future__ import annotations

import ast

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.attention import Causal, sdpa_from_bsnd
from codemods.model.cstnodes import bind
from codemods.families.routes import RequireImport, RoutedCallRule, call_routes, keyword_problem
from codemods.families.third_party import library_prefilter

# the routed function, its parameters, the keywords that map only at some values and the causal
# biases: codemods/data/routes.json (a new xFormers version is a data change)
ROUTES = call_routes("xformers")
FUNCTIONS = tuple(f"{module}.{name}" for module in ROUTES["modules"] for name in ROUTES["functions"])
PARAMETERS: tuple[str, ...] = tuple(ROUTES["functions"]["memory_efficient_attention"]["parameters"])
CAUSAL_BIASES: tuple[str, ...] = tuple(ROUTES["causal_biases"])  # top-left aligned (not LowerTriangularFromBottomRightMask)


class Xformers(RoutedCallRule):
    """## What it does

    `xformers.ops.memory_efficient_attention(q, k, v, attn_bias=None | LowerTriangularMask(),
    p=..., scale=...)` becomes `torch.nn.functional.scaled_dot_product_attention` on the same
    tensors with the sequence moved next to head_dim, and its result moved back; an import of
    it whose every use was rewritten goes. Any other `attn_bias` (a tensor, `BlockDiagonalMask`,
    a bottom-right mask, a variable) or an `output_dtype` leaves the call as written, reported
    (error) with the reason; the rest of xFormers is reported with its route.

    | xFormers | SDPA |
    |---|---|
    | `[B, M, H, K]` (or `[B, M, K]`) tensors | `x.movedim(1, -2)` (`[B, H, M, K]`; a 3-D tensor stays), result `.movedim(-2, 1)` |
    | `attn_bias=LowerTriangularMask()` (top-left aligned) | `is_causal=True` |
    | `p=...` | `dropout_p=...` |
    | `scale=None` (1/sqrt(K)) / `scale=s` | left out (SDPA's default is the same) / `scale=s` |
    | `op=...` | dropped (it picks one of xFormers' kernels for the same attention) |

    ## Why

    xformers' attention kernels are CUDA-only; SDPA is native on NPU (torch_npu registers it for fp16/bf16/fp32, head_dim <= 512) and stays portable. `memory_efficient_attention` takes [batch, seq, heads, head_dim] where SDPA wants [batch, heads, seq, head_dim], and its 3-D form [batch, seq, head_dim] is SDPA's own, which `movedim(1, -2)` leaves as it is (a plain `transpose(1, 2)` would silently attend over head_dim). `LowerTriangularMask` is aligned top-left, as SDPA's `is_causal` is.

    ## Example

    ```python
    # before
    import xformers.ops
    out = xformers.ops.memory_efficient_attention(q, k, v, attn_bias=xformers.ops.LowerTriangularMask(), p=0.1)    # NPU306

    # after
    out = torch.nn.functional.scaled_dot_product_attention(q.movedim(1, -2), k.movedim(1, -2), v.movedim(1, -2), is_causal=True, dropout_p=0.1).movedim(-2, 1)
    ```

    ## Fix safety

    Unsafe. Without dropout it is the same attention in another kernel's accumulation order
    (tests/rules/test_attention_routes.py runs a reference memory_efficient_attention against
    the rewritten call under the emulation, float32, causal or not, within 1e-5). SDPA needs as
    many key/value heads as query heads (it raises otherwise; xFormers' 5-D grouped form is not
    rewritten by shape, and a 5-D tensor makes SDPA raise). Dropout draws from the device's
    generator: train-mode results differ from the CUDA run by design.

    ## Targets

    - **npu**: rewrites to `torch.nn.functional.scaled_dot_product_attention` (unsafe fix)
    - **portable**: the same rewrite (SDPA runs on every device)
    """

    code = "NPU306"
    supported_targets = frozenset({"npu", "portable"})
    name = "xformers"
    summary = ("xFormers' memory_efficient_attention becomes scaled_dot_product_attention (layout, causal mask, "
               "dropout and scale mapped); the rest of xFormers is reported with its route")
    prefilter = library_prefilter("NPU306")
    library = "xFormers"
    modules = tuple(ROUTES["modules"])

    def routed(self, qualified: str | None) -> str | None:
        return "memory_efficient_attention" if qualified in FUNCTIONS else None

    def route(self, node: cst.Call, function: str, require_import: RequireImport) -> tuple[str | None, str]:
        args, problem = bind(node, PARAMETERS, tuple(ROUTES["keywords"]))
        if problem is not None:
            return None, problem
        if not all(name in args for name in ("query", "key", "value")):
            return None, "query, key and value are not all given"
        problem = keyword_problem(args, ROUTES["keywords"])
        if problem is not None:
            return None, problem
        causal, problem = self._causal(args.get("attn_bias", "None"))
        if problem is not None:
            return None, problem
        call = sdpa_from_bsnd(args["query"], args["key"], args["value"], causal, args.get("scale"), args.get("p"),
                              require_import)
        return call, ("`torch.nn.functional.scaled_dot_product_attention` on [batch, heads, seq, head_dim] views"
                      + (", LowerTriangularMask as is_causal" if causal else ""))

    def consumed(self, call: ast.Call) -> list[ast.AST]:
        bias = next((k.value for k in call.keywords if k.arg == "attn_bias"), call.args[3] if len(call.args) > 3 else None)
        return [call.func, *([bias] if bias is not None else [])]

    def _causal(self, bias: str) -> tuple[Causal | None, str | None]:
        """The causal alignment `attn_bias` asks for, or why it cannot be mapped."""
        if bias == "None":
            return None, None
        parsed = cst.parse_expression(bias)
        if isinstance(parsed, cst.Call) and not parsed.args and self._qualify(parsed.func) in CAUSAL_BIASES:
            return "top-left", None
        return None, (f"`attn_bias={bias}` is not mapped: only None and `LowerTriangularMask()` are; a tensor "
                      "bias would be SDPA's float `attn_mask` but cannot be told apart here from xFormers' other "
                      "biases (BlockDiagonalMask packs sequences, which SDPA has no form for)")


CASES = [
    Invalid(  # the causal mask, dropout; both imports go: every use of them was in the rewritten call
        """\
        import torch
        from xformers.ops import memory_efficient_attention
        import xformers.ops as xops
        out = memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask(), p=0.1)
        """,
        after="""\
        import torch


        out = torch.nn.functional.scaled_dot_product_attention(q.movedim(1, -2), k.movedim(1, -2), v.movedim(1, -2), is_causal=True, dropout_p=0.1).movedim(-2, 1)
        """,
    ),
    Invalid(  # scale kept, the kernel choice dropped; the same under portable
        """\
        import xformers.ops
        out = xformers.ops.memory_efficient_attention(q, k, v, None, 0.0, 0.125, op=None)
        """,
        after="""\
        import torch

        out = torch.nn.functional.scaled_dot_product_attention(q.movedim(1, -2), k.movedim(1, -2), v.movedim(1, -2), scale=0.125).movedim(-2, 1)
        """,
        codes=("NPU306", "NPU100"),
        options=(("target", "portable"),),
    ),
    Invalid(  # diffusers' processors pass a tensor or a packed BlockDiagonalMask: not told apart, kept, error
        """\
        import xformers.ops as xops
        out = xops.memory_efficient_attention(query, key, value, attn_bias=attention_mask, op=self.attention_op)
        """,
    ),
    Valid(  # log text and a backend selector
        """\
        import logging
        backend = "xformers" if use_memory_efficient_attention else "sdpa"
        logging.info("memory_efficient_attention via %s", backend)
        """,
    ),
]

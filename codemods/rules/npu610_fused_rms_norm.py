"""NPU610 `fused-rms-norm`: a hand-written RMSNorm module's forward becomes `torch_npu.npu_rms_norm`."""

from __future__ import annotations

import ast

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule, keyword_value, last_dim, parsed, same

API = "torch_npu.npu_rms_norm"


class FusedRmsNorm(TuneRule):
    """## What it does

    The `forward(self, x)` of an RMSNorm module written by hand becomes
    `return torch_npu.npu_rms_norm(x, self.weight, epsilon=EPS)[0]`.

    Opt-in: `npu-migrate apply --enable tune` or `--enable fused-rms-norm`.

    ## Why

    `npu_rms_norm(x, gamma, epsilon)` computes `x / sqrt(mean(x², last dim) + eps) * gamma` in one
    kernel, forward and backward, in float32 inside, returning `x`'s dtype (op-plugin's
    `npu_rms_norm` page and test: the reference squares, averages, adds eps, takes the reciprocal
    square root, multiplies by x and gamma in float32, then casts). The hand-written form runs five
    element-wise kernels and keeps their outputs for the backward pass.

    Recognised (the LLaMA, llama2.c and lit-llama spellings), inside one class:
    - a normalisation `N(x)`: `x * torch.rsqrt(M + EPS)` with `M` the mean of the squares over the
      last dimension with `keepdim=True` (`x.pow(2).mean(-1, keepdim=True)`, `(x ** 2).mean(dim=-1,
      keepdim=True)`, `torch.mean(x * x, ...)`), written in `forward` or in a helper method
      (`def _norm(self, x): return ...`), called on `x` or `x.float()`, optionally followed by
      `.type_as(x)`;
    - `forward` returns `N(x) * self.W` or `self.W * N(x)`, directly or through one assignment,
      optionally cast back as a whole: `(self.W * N(x.float())).type_as(x)` (MiniMind, Qwen), which
      is `npu_rms_norm`'s own order (the weight applied in float32, then the cast).

    Anything else in `forward` (a residual, a bias, a different axis) is left alone.

    ## Example

    ```python
    # before
    class RMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight

    # after
    class RMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]
    ```

    ## Fix safety

    Unsafe. With `x` and the weight in the same dtype (float32 training, or a bf16 model) the
    formula is the same; the kernel sums the squares in its own order (measured in docs/tune.md
    against the emulation's reference). When `x` is float16/bfloat16 and the weight float32 (autocast),
    the LLaMA form `N(x).type_as(x) * W` returns float32 (the product promotes) where
    `npu_rms_norm` returns `x`'s dtype, having applied the weight in float32 before the cast: a
    dtype change the next layer sees, and values that differ by the rounding to `x`'s dtype
    (measured: 5.9e-3 of the largest output for bf16, `python bench/tune_fused_numerics.py`;
    `npu-migrate verify` reports the dtype change, VER001). The form that casts back last,
    `(W * N(x.float())).type_as(x)`, is the fused op's own order: no difference.
    `npu_rms_norm` takes 2-D to 8-D inputs (`docs/zh/custom_APIs`, op-plugin).

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix); opt-in; needs torch_npu 2.2 (`target-version`)
    - **portable**: reports only (a torch_npu operator)
    """

    code = "NPU610"
    name = "fused-rms-norm"
    summary = "A hand-written RMSNorm's `forward` becomes `torch_npu.npu_rms_norm`"
    prefilter = r"\brsqrt\b"
    whole_statements = True  # the class, its helper and its forward together
    needs_torch_npu = True
    api = API

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        methods = {s.name.value: s for s in updated_node.body.body if isinstance(s, cst.FunctionDef)}
        forward = methods.get("forward")
        if forward is None:
            return updated_node
        helpers = {name: tree for name, fn in methods.items()
                   if name != "forward" and isinstance(tree := parsed(fn)[0], ast.FunctionDef)}
        tree, text = parsed(forward)
        found = _rms_forward(tree, helpers, text)
        if found is None:
            return updated_node
        x, weight, eps = found
        if self.version_blocks(original_node, f"`{original_node.name.value}.forward` -> `{API}`"):
            return updated_node
        call = f"torch_npu.npu_rms_norm({x}, {weight}, epsilon={eps})[0]"
        body = forward.body
        first = body.body[0] if isinstance(body, cst.IndentedBlock) and body.body else None
        docstring = [first] if first is not None and _is_docstring(first) else []
        new_forward = forward.with_changes(body=body.with_changes(body=[*docstring, cst.parse_statement(f"return {call}\n")]))
        self.fixed(original_node, f"`{original_node.name.value}.forward`: the hand-written RMSNorm becomes "
                                  f"`{call}` (one fused kernel, forward and backward)")
        return updated_node.with_changes(body=updated_node.body.with_changes(
            body=[new_forward if s is forward else s for s in updated_node.body.body]))


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _rms_forward(forward: ast.AST | None, helpers: dict[str, ast.FunctionDef],
                 text: str) -> tuple[str, str, str] | None:
    """(x, weight, eps) source texts when `forward` is `N(x) * self.W`, else None."""
    if not isinstance(forward, ast.FunctionDef) or len(forward.args.args) != 2:
        return None
    x = forward.args.args[1].arg
    body = [s for s in forward.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    product = _cast_back(body[-1].value, x)  # `(self.W * N(x.float())).type_as(x)`: npu_rms_norm's order
    bound: dict[str, ast.AST] = {}
    if len(body) == 2 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1 \
            and isinstance(body[0].targets[0], ast.Name):
        bound[body[0].targets[0].id] = body[0].value
    elif len(body) != 1:
        return None
    if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
        return None
    for first, weight in ((product.left, product.right), (product.right, product.left)):
        norm: ast.AST = bound[first.id] if isinstance(first, ast.Name) and first.id in bound else first
        eps = _normalised(norm, x, helpers)
        if eps is not None and _is_self_attribute(weight):
            return x, ast.unparse(weight), eps if isinstance(eps, str) else ast.get_source_segment(text, eps) or ""
    return None


def _cast_back(expr: ast.AST, x: str) -> ast.AST:
    """`E` for `E.type_as(x)`, else `expr`."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "type_as" \
            and len(expr.args) == 1 and isinstance(expr.args[0], ast.Name) and expr.args[0].id == x:
        return expr.func.value
    return expr


def _normalised(expr: ast.AST, x: str, helpers: dict[str, ast.FunctionDef]) -> ast.AST | str | None:
    """eps when `expr` is the RMS normalisation of `x` (inline or a helper's), else None."""
    expr = _cast_back(expr, x)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and _is_self(expr.func.value) \
            and expr.func.attr in helpers and len(expr.args) == 1 and _is_input(expr.args[0], x):
        helper = helpers[expr.func.attr]
        if len(helper.args.args) != 2 or len(helper.body) != 1 or not isinstance(helper.body[0], ast.Return):
            return None
        eps = _inline_norm(helper.body[0].value, helper.args.args[1].arg, exact_input=True)
        return ast.unparse(eps) if eps is not None else None
    return _inline_norm(expr, x, exact_input=False)


def _inline_norm(expr: ast.AST | None, x: str, exact_input: bool) -> ast.AST | None:
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult)):
        return None
    for value, scale in ((expr.left, expr.right), (expr.right, expr.left)):
        ok_input = (isinstance(value, ast.Name) and value.id == x) if exact_input else _is_input(value, x)
        if not ok_input or not (isinstance(scale, ast.Call) and ast.unparse(scale.func) in ("torch.rsqrt",)
                                and len(scale.args) == 1):
            continue
        inner = scale.args[0]
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):
            for square_mean, eps in ((inner.left, inner.right), (inner.right, inner.left)):
                if _mean_of_squares(square_mean, value):
                    return eps
    return None


def _mean_of_squares(expr: ast.AST, x: ast.AST) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr == "mean":
        squared, dim_at = func.value, 0
    elif ast.unparse(func) == "torch.mean" and expr.args:
        squared, dim_at = expr.args[0], 1
    else:
        return False
    dim = keyword_value(expr, "dim", dim_at)
    keepdim = keyword_value(expr, "keepdim", dim_at + 1)
    if dim is None or not last_dim(dim) or not (isinstance(keepdim, ast.Constant) and keepdim.value is True):
        return False
    return _square_of(squared, x)


def _square_of(expr: ast.AST, x: ast.AST) -> bool:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Pow):
        return same(expr.left, x) and isinstance(expr.right, ast.Constant) and expr.right.value == 2
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return same(expr.left, x) and same(expr.right, x)
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "pow"
            and same(expr.func.value, x) and len(expr.args) == 1
            and isinstance(expr.args[0], ast.Constant) and expr.args[0].value == 2)


def _is_input(node: ast.AST, x: str) -> bool:
    """`x` or `x.float()`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "float" \
            and not node.args:
        node = node.func.value
    return isinstance(node, ast.Name) and node.id == x


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and _is_self(node.value)


LLAMA = """\
        import torch


        class RMSNorm(torch.nn.Module):
            def __init__(self, dim, eps=1e-6):
                super().__init__()
                self.eps = eps
                self.weight = torch.nn.Parameter(torch.ones(dim))

            def _norm(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

            def forward(self, x):
                output = self._norm(x.float()).type_as(x)
                return output * self.weight
        """

CASES = [
    Invalid(
        LLAMA,
        after=LLAMA.replace("        import torch\n", "        import torch\n        import torch_npu  # noqa: F401\n").replace(
            """                output = self._norm(x.float()).type_as(x)
                return output * self.weight""",
            "                return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]"),
        codes=("NPU610", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(
        """\
        import torch
        class Norm(torch.nn.Module):
            def forward(self, h):
                return self.scale * (h * torch.rsqrt((h ** 2).mean(dim=-1, keepdim=True) + 1e-5))
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        class Norm(torch.nn.Module):
            def forward(self, h):
                return torch_npu.npu_rms_norm(h, self.scale, epsilon=1e-5)[0]
        """,
        codes=("NPU610", "NPU100"),
        with_rules=("NPU100",),
    ),
    # the weight applied in float32 before the cast back (MiniMind's spelling)
    Invalid(
        """\
        import torch
        class RMSNorm(torch.nn.Module):
            def norm(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

            def forward(self, x):
                return (self.weight * self.norm(x.float())).type_as(x)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        class RMSNorm(torch.nn.Module):
            def norm(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

            def forward(self, x):
                return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]
        """,
        codes=("NPU610", "NPU100"),
        with_rules=("NPU100",),
    ),
    # the version gate: no npu_rms_norm in every torch_npu 2.1 release
    Invalid(LLAMA, options=(("target_version", "2.1"),)),
    # normalised over another axis: not RMSNorm over the last dimension
    Valid(
        """\
        import torch
        class Norm(torch.nn.Module):
            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-5) * self.weight
        """,
    ),
]

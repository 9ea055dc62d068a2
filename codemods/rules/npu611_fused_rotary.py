"""NPU611 `fused-rotary`: `x * cos + rotate_half(x) * sin` becomes `torch_npu.npu_rotary_mul`."""

from __future__ import annotations

import ast

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule, keyword_value, last_dim, parsed, same

API = "torch_npu.npu_rotary_mul"


class FusedRotary(TuneRule):
    """## What it does

    `x * cos + rotate_half(x) * sin` (either order of the terms and factors) becomes
    `torch_npu.npu_rotary_mul(x, cos, sin)`, where `rotate_half` is a function of the same file
    that swaps the two halves of the last dimension and negates the second:
    `torch.cat((-x2, x1), dim=-1)` with `x1, x2` the halves (`x[..., : d // 2]` and
    `x[..., d // 2 :]`, or `x.chunk(2, dim=-1)`).

    Opt-in: `npu-migrate apply --enable tune` or `--enable fused-rotary`.

    ## Why

    `npu_rotary_mul(input, r1, r2, rotary_mode="half")` computes `input * r1 + rotate(input) * r2`
    with `rotate` exactly that half swap (op-plugin's `npu_rotary_mul` page gives the same
    formula as its equivalent) in one kernel, where the hand-written form runs a slice, a negation,
    a concatenation, two multiplications and an addition, forward and backward.

    ## Example

    ```python
    # before
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary(q, cos, sin):
        return (q * cos) + (rotate_half(q) * sin)

    # after
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary(q, cos, sin):
        return torch_npu.npu_rotary_mul(q, cos, sin)
    ```

    ## Fix safety

    Unsafe: the formula is the same, but `npu_rotary_mul` takes 3-D and 4-D `input`, `r1`, `r2`
    only (float16, bfloat16, float32), which the code does not show; the emulation's reference
    (under `python -m npu_migrate.emulation`) raises on other ranks, so `npu-migrate verify` finds a
    call that the device would reject. When `cos`/`sin` need no gradient, the kernel keeps its
    input for the backward pass, a little more device memory than the unfused form (op-plugin's
    note).

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix); opt-in; needs torch_npu 1.11 (`target-version`)
    - **portable**: reports only (a torch_npu operator)
    """

    code = "NPU611"
    name = "fused-rotary"
    summary = "`x * cos + rotate_half(x) * sin` becomes `torch_npu.npu_rotary_mul(x, cos, sin)`"
    prefilter = r"\*"  # any product: the rotation function is found in the whole file
    needs_torch_npu = True
    api = API

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        if not isinstance(original_node.operator, cst.Add):
            return updated_node
        tree, text = parsed(original_node)
        found = _rotary(tree, self._rotate_halves())
        if found is None:
            return updated_node
        x, cos, sin = (ast.get_source_segment(text, part) or ast.unparse(part) for part in found)
        if self.version_blocks(original_node, f"`{API}`"):
            return updated_node
        call = f"torch_npu.npu_rotary_mul({x}, {cos}, {sin})"
        self.fixed(original_node, f"rotary embedding in one kernel: `{call}` (half-rotation mode, the "
                                  "formula of the hand-written form)")
        return cst.parse_expression(call)

    def _rotate_halves(self) -> set[str]:
        if "rotate" not in self.file:
            self.file["rotate"] = {f.name for f in ast.walk(self.context.facts.tree)
                                   if isinstance(f, ast.FunctionDef) and _is_rotate_half(f)}
        found: set[str] = self.file["rotate"]
        return found


def _rotary(tree: ast.AST | None, rotate: set[str]) -> tuple[ast.AST, ast.AST, ast.AST] | None:
    """(x, cos, sin) when `tree` is `x * cos + R(x) * sin` with R in `rotate`."""
    if not rotate or not (isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Add)):
        return None
    for plain, rotated in ((tree.left, tree.right), (tree.right, tree.left)):
        if not (_product(plain) and _product(rotated)):
            continue
        for rot, sin in ((rotated.left, rotated.right), (rotated.right, rotated.left)):  # type: ignore[attr-defined]
            if not (isinstance(rot, ast.Call) and isinstance(rot.func, ast.Name) and rot.func.id in rotate
                    and len(rot.args) == 1 and not rot.keywords):
                continue
            x = rot.args[0]
            for value, cos in ((plain.left, plain.right), (plain.right, plain.left)):  # type: ignore[attr-defined]
                if same(value, x) and not same(cos, sin):
                    return x, cos, sin
    return None


def _product(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)


def _is_rotate_half(function: ast.FunctionDef) -> bool:
    """`def f(x)` that returns `torch.cat((-second, first), dim=-1)` of the halves of x."""
    if len(function.args.args) != 1 or not function.body or not isinstance(function.body[-1], ast.Return):
        return False
    x = function.args.args[0].arg
    halves: dict[str, str] = {}
    for stmt in function.body[:-1]:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            return False
        halves.update(_halves(stmt.targets[0], stmt.value, x))
    result = function.body[-1].value
    if not (isinstance(result, ast.Call) and ast.unparse(result.func) == "torch.cat" and result.args):
        return False
    dim = keyword_value(result, "dim", 1)
    parts = result.args[0]
    if dim is None or not last_dim(dim) or not isinstance(parts, (ast.Tuple, ast.List)) or len(parts.elts) != 2:
        return False
    negated, kept = parts.elts
    return (isinstance(negated, ast.UnaryOp) and isinstance(negated.op, ast.USub)
            and isinstance(negated.operand, ast.Name) and halves.get(negated.operand.id) == "second"
            and isinstance(kept, ast.Name) and halves.get(kept.id) == "first")


def _halves(target: ast.AST, value: ast.AST, x: str) -> dict[str, str]:
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts):
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "chunk" \
                and isinstance(value.func.value, ast.Name) and value.func.value.id == x and value.args \
                and isinstance(value.args[0], ast.Constant) and value.args[0].value == 2:
            dim = keyword_value(value, "dim", 1)
            if dim is not None and last_dim(dim):
                return {target.elts[0].id: "first", target.elts[1].id: "second"}  # type: ignore[attr-defined]
        return {}
    if not (isinstance(target, ast.Name) and isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name) and value.value.id == x):
        return {}
    index = value.slice
    if not (isinstance(index, ast.Tuple) and len(index.elts) == 2 and isinstance(index.elts[0], ast.Constant)
            and index.elts[0].value is Ellipsis and isinstance(index.elts[1], ast.Slice)):
        return {}
    half = index.elts[1]
    if half.lower is None and half.upper is not None and half.step is None:
        return {target.id: "first"}
    if half.upper is None and half.lower is not None and half.step is None:
        return {target.id: "second"}
    return {}


HF = """\
        import torch


        def rotate_half(x):
            x1 = x[..., : x.shape[-1] // 2]
            x2 = x[..., x.shape[-1] // 2 :]
            return torch.cat((-x2, x1), dim=-1)


        def apply_rotary_pos_emb(q, k, cos, sin):
            q_embed = (q * cos) + (rotate_half(q) * sin)
            k_embed = (k * cos) + (rotate_half(k) * sin)
            return q_embed, k_embed
        """

CASES = [
    Invalid(
        HF,
        after=HF.replace("        import torch\n", "        import torch\n        import torch_npu  # noqa: F401\n").replace(
            "(q * cos) + (rotate_half(q) * sin)", "torch_npu.npu_rotary_mul(q, cos, sin)").replace(
            "(k * cos) + (rotate_half(k) * sin)", "torch_npu.npu_rotary_mul(k, cos, sin)"),
        codes=("NPU611", "NPU100"),
        with_rules=("NPU100",),
    ),
    # the version gate: torch_npu 1.8 has no npu_rotary_mul
    Invalid(HF, options=(("target_version", "1.8"),)),
    # interleaved pairs are another rotation: left alone
    Valid(
        """\
        import torch
        def rotate_every_two(x):
            x1 = x[..., ::2]
            x2 = x[..., 1::2]
            return torch.stack((-x2, x1), dim=-1).flatten(-2)
        def apply(q, cos, sin):
            return (q * cos) + (rotate_every_two(q) * sin)
        """,
    ),
]

"""NPU612 `fused-swiglu`: `F.silu(a) * b` over the two halves of one tensor becomes
`torch_npu.npu_swiglu`."""

from __future__ import annotations

import ast

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule, keyword_value, last_dim, parsed

API = "torch_npu.npu_swiglu"
SILU = ("torch.nn.functional.silu",)


class FusedSwiglu(TuneRule):
    """## What it does

    `F.silu(a) * b` (or `b * F.silu(a)`) where `a, b = x.chunk(2, dim=-1)` earlier in the same
    function becomes `torch_npu.npu_swiglu(x, dim=-1)`. The gate written over two projections
    (`F.silu(self.w1(x)) * self.w3(x)`) is reported with the way to fuse it.

    Opt-in: `npu-migrate apply --enable tune` or `--enable fused-swiglu`.

    ## Why

    `npu_swiglu(input, dim=-1)` splits `input` in two halves `A`, `B` along `dim` and returns
    `A * sigmoid(A) * B` = `silu(A) * B` (op-plugin's `npu_swiglu` page): the gate in one kernel,
    forward and backward, instead of SiLU and a multiplication.

    The two-projection form has no exact one-call rewrite: `npu_swiglu` wants both halves in one
    tensor, and concatenating the two outputs costs the copy the fusion saves. The ModelZoo ports
    merge the two Linear layers into one of twice the width (a change of the parameters and the
    checkpoints, so a person's): the diagnostic says so.

    ## Example

    ```python
    # before
    import torch.nn.functional as F

    def forward(self, x):
        h = self.proj(x)
        a, b = h.chunk(2, dim=-1)
        return F.silu(a) * b

    # after
    import torch.nn.functional as F

    def forward(self, x):
        h = self.proj(x)
        a, b = h.chunk(2, dim=-1)
        return torch_npu.npu_swiglu(h, dim=-1)
    ```

    Only when the chunked tensor is a name is the rewrite made (`self.proj(x).chunk(2, dim=-1)` is
    reported): evaluating `self.proj(x)` twice would run the layer twice.

    ## Fix safety

    Unsafe: the formula is the same (computed in the input's dtype); `npu_swiglu` rejects
    non-contiguous input and is listed for Atlas A2 training products (op-plugin's page), which
    the code does not show; the unused halves stay (views, no copy).

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix); opt-in; needs torch_npu 2.2 (`target-version`)
    - **portable**: reports only (a torch_npu operator)
    """

    code = "NPU612"
    name = "fused-swiglu"
    summary = "`F.silu(a) * b` over the halves of one tensor becomes `torch_npu.npu_swiglu`"
    prefilter = r"\bsilu\b"
    whole_statements = True  # the chunk and the gate are statements of one function
    needs_torch_npu = True
    api = API

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        tree, text = parsed(node)
        if isinstance(tree, ast.FunctionDef):
            self.file.setdefault("halves", {}).update(_chunked_halves(tree, text))

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        if not isinstance(original_node.operator, cst.Multiply):
            return updated_node
        tree, _ = parsed(original_node)
        if not isinstance(tree, ast.BinOp):
            return updated_node
        halves: dict[tuple[str, str], str] = self.file.get("halves", {})
        for gate, other in ((tree.left, tree.right), (tree.right, tree.left)):
            if not self._is_silu(gate):
                continue
            gated = gate.args[0]  # type: ignore[attr-defined]
            source = halves.get((ast.unparse(gated), ast.unparse(other)))
            if source is None:
                if isinstance(gated, ast.Call) and isinstance(other, ast.Call):
                    self.report(original_node, "a SwiGLU gate over two projections: merge them into one "
                                               "Linear of twice the width and call `torch_npu.npu_swiglu` "
                                               "on its output (the parameters change: by hand)")
                return updated_node
            if not source.isidentifier():
                self.report(original_node, f"SwiGLU over the halves of `{source}`: bind it to a name first, "
                                           "then `torch_npu.npu_swiglu(name, dim=-1)` (not rewritten: the "
                                           "expression would run twice)")
                return updated_node
            if self.version_blocks(original_node, f"`{API}`"):
                return updated_node
            call = f"torch_npu.npu_swiglu({source}, dim=-1)"
            self.fixed(original_node, f"SwiGLU in one kernel: `{call}` (silu of the first half times the second)")
            return cst.parse_expression(call)
        return updated_node

    def _is_silu(self, node: ast.AST) -> bool:
        if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
            return False
        parts = ast.unparse(node.func).split(".")
        return self.context.facts.qualify(parts) in SILU


def _chunked_halves(function: ast.FunctionDef, text: str) -> dict[tuple[str, str], str]:
    """(first half, second half) -> the chunked tensor's source, for `a, b = x.chunk(2, dim=-1)`."""
    found = {}
    for stmt in ast.walk(function):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple)
                and len(stmt.targets[0].elts) == 2):
            continue
        value = stmt.value
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "chunk"
                and value.args and isinstance(value.args[0], ast.Constant) and value.args[0].value == 2):
            continue
        dim = keyword_value(value, "dim", 1)
        if dim is None or not last_dim(dim):
            continue
        first, second = (ast.unparse(e) for e in stmt.targets[0].elts)
        found[(first, second)] = ast.get_source_segment(text, value.func.value) or ast.unparse(value.func.value)
    return found


CASES = [
    Invalid(
        """\
        import torch.nn.functional as F
        def swiglu(x):
            a, b = x.chunk(2, dim=-1)
            return F.silu(a) * b
        """,
        after="""\
        import torch_npu  # noqa: F401
        import torch.nn.functional as F
        def swiglu(x):
            a, b = x.chunk(2, dim=-1)
            return torch_npu.npu_swiglu(x, dim=-1)
        """,
        codes=("NPU612", "NPU100"),
        with_rules=("NPU100",),
    ),
    # two projections: reported with the way to fuse them
    Invalid(
        """\
        import torch.nn.functional as F
        class FeedForward:
            def forward(self, x):
                return self.w2(F.silu(self.w1(x)) * self.w3(x))
        """,
    ),
    # the version gate
    Invalid(
        """\
        import torch.nn.functional as F
        def swiglu(x):
            a, b = x.chunk(2, dim=-1)
            return F.silu(a) * b
        """,
        options=(("target_version", "2.1"),),
    ),
    Valid(
        """\
        import torch.nn.functional as F
        def gated(x, y):
            return F.silu(x) * y
        """,
    ),
]

"""NPU525: the float64-reduction rule."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, LineSpan, Rule
from codemods.data.tables import load_data
from codemods.api.positions import node_positions
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Severity

DATA = "distributed.json"
FLOAT64 = frozenset({"torch.float64", "torch.double"})


@cache
def _reductions() -> tuple[dict[str, dict[str, Any]], str]:
    data = load_data(DATA)
    return data["reductions"], data["float64_reduction"]


def _argument(call: ast.Call, position: int | None, keyword: str) -> ast.expr | None:
    """The argument of `call` at `position` (None: keyword only) or named `keyword`."""
    named = next((k.value for k in call.keywords if k.arg == keyword), None)
    if named is not None or position is None or position >= len(call.args) \
            or any(isinstance(a, ast.Starred) for a in call.args):
        return named
    return call.args[position]


def _scopes(model: FileModel) -> list[list[ast.stmt]]:
    """The module's own statements and each function's body (a nested function counts in its
    own body and in the one around it)."""
    found: list[list[ast.stmt]] = [[s for s in model.tree.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]]
    found += [node.body for node in model.of_type(ast.FunctionDef, ast.AsyncFunctionDef)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


def _reduced_name(call: ast.Call, qualify: Callable[[Sequence[str]], str | None]) -> str | None:
    """The name of the tensor that `call` reduces (`dist.all_reduce(t)` -> "t"), if it is one."""
    parts = ast_dotted_parts(call.func)
    spec = _reductions()[0].get((qualify(parts) if parts else None) or "")
    tensor = _argument(call, spec["position"], spec["keyword"]) if spec else None
    return tensor.id if isinstance(tensor, ast.Name) else None


def _float64_lines(model: FileModel) -> frozenset[int]:
    """The lines of the float64 dtypes to turn: `name = f(..., dtype=torch.float64)` where a
    reduction of the same function (or of the module's own statements) takes `name` (lines,
    not columns: the engine hands a rule statements dedented). Once per file (`model.derived`)."""
    # a call resolves to a reduction only through the file's imports, so each part of the
    # reduction's name is in the file's text (most files that say float64 have no such words)
    if not any(all(part in model.source for part in name.split(".")) for name in _reductions()[0]):
        return frozenset()
    qualify = model.facts.qualify
    holders: set[int] = set()  # the reductions and every node around them
    for call in model.of_type(ast.Call):
        node: ast.AST | None = call if isinstance(call, ast.Call) and _reduced_name(call, qualify) else None
        while node is not None and id(node) not in holders:
            holders.add(id(node))
            node = model.parents.get(id(node))
    found: set[int] = set()
    for scope in _scopes(model):
        if not any(id(statement) in holders for statement in scope):
            continue  # no reduction in this scope: nothing of it is reduced
        nodes = [n for s in scope for n in ast.walk(s)]
        reduced = {name for n in nodes if isinstance(n, ast.Call) and (name := _reduced_name(n, qualify))}
        for assign in (n for n in nodes if isinstance(n, ast.Assign)):
            target, value = assign.targets[0], assign.value
            on_device = isinstance(value, ast.Call) and any(k.arg == "device" for k in value.keywords)
            dtype = _argument(value, None, "dtype") if isinstance(value, ast.Call) and on_device else None
            parts = ast_dotted_parts(dtype) if dtype is not None else None
            if len(assign.targets) == 1 and isinstance(target, ast.Name) and target.id in reduced \
                    and parts and qualify(parts) in FLOAT64 and dtype is not None:
                found.add(dtype.lineno)
    return frozenset(found)


class Float64Reduction(Rule):
    """## What it does

    A float64 tensor that a collective reduces (`t = torch.tensor([count, total], dtype=torch.float64, device="cuda")` then `dist.all_reduce(t)` in the same function) is built as float32

    ## Why

    HCCL reduces no float64 on Atlas training, A2 and A3 products: torch_npu's `ProcessGroupHCCL` raises `HCCL allreduce: Unsupported data type fp64` (only Ascend 950 adds fp64), so the first distributed metric sync stops the run. The DeiT/DINO/timm `SmoothedValue.synchronize_between_processes` pattern builds exactly such a tensor; Huawei's ModelZoo ports of DeiT and DINO change it to float32. The rewrite changes the `dtype=` of the tensor's constructor call, where the name is assigned in the same function (or module) as the reduction and the call names a `device=` (a CPU tensor is reduced by a gloo group, which has float64); a tensor that comes from elsewhere is left alone.

    ## Example

    ```python
    # before
    t = torch.tensor([self.count, self.total], dtype=torch.float64, device="cuda")
    dist.all_reduce(t)
    # after (with NPU500 turning the device)
    t = torch.tensor([self.count, self.total], dtype=torch.float32, device="npu")
    dist.all_reduce(t)
    ```

    ## Fix safety

    Safe in the sense of NPU524: the float64 reduction cannot run on those NPUs at all, and the float32 sum is the NPU's form of it (float32 holds integers exactly up to 2**24; a sum of metrics that needs more precision needs a hand-written split). Suppress with `# npu-migrate: ignore[NPU525]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet (float64 runs on CUDA and CPU; under `--target portable` it is reported instead)
    """

    code = "NPU525"
    prefilter_in_code = True
    name = "float64-reduction"
    summary = "A float64 tensor that `all_reduce`/`reduce` sums is built as float32 (HCCL has no float64 reduction)"
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"float64|double"

    def _float64_targets(self) -> frozenset[int]:
        return self.context.model.derived(_float64_lines)

    def target_lines(self) -> Iterable[LineSpan]:
        """The lines of the float64 dtypes to turn, the only ones `leave_Attribute` rewrites."""
        return [(line, line) for line in self._float64_targets()]

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        if original_node.attr.value not in ("float64", "double") or not self._float64_targets() \
                or self.resolve(original_node) not in FLOAT64:
            return updated_node
        module = self.context.module
        line = node_positions(module, [original_node])[id(original_node)][0] if module is not None else 0
        if line + self.context.line_offset not in self._float64_targets():
            return updated_node
        _, why = _reductions()
        self.fixed(original_node, f"`{cst.Module([]).code_for_node(original_node)}` → `torch.float32`: {why}")
        return updated_node.with_changes(attr=cst.Name("float32"))


CASES = [
    Invalid(  # DeiT's SmoothedValue: the tensor summed across ranks is built as float32
        """\
import torch
import torch.distributed as dist


def synchronize(count, total):
    t = torch.tensor([count, total], dtype=torch.float64, device="cuda")
    dist.barrier()
    dist.all_reduce(t)
    return t.tolist()
""",
        after="""\
import torch
import torch.distributed as dist


def synchronize(count, total):
    t = torch.tensor([count, total], dtype=torch.float32, device="cuda")
    dist.barrier()
    dist.all_reduce(t)
    return t.tolist()
""",
    ),
    Invalid(  # `torch.double` and the keyword form of the reduction's tensor
        """\
import torch
from torch import distributed
t = torch.zeros(2, dtype=torch.double, device=device)
distributed.reduce(tensor=t, dst=0)
""",
        after="""\
import torch
from torch import distributed
t = torch.zeros(2, dtype=torch.float32, device=device)
distributed.reduce(tensor=t, dst=0)
""",
    ),
    Valid(  # a CPU tensor (no device): reduced by a gloo group, which has float64
        """\
import torch
import torch.distributed as dist
t = torch.tensor([1.0], dtype=torch.float64)
dist.all_reduce(t, group=cpu_group)
""",
    ),
    Valid(  # float64 that no reduction takes stays float64
        """\
import torch
import torch.distributed as dist
t = torch.tensor([1.0], dtype=torch.float64, device="cuda")
u = torch.tensor([1.0], dtype=torch.float32, device="cuda")
dist.all_reduce(u)
""",
    ),
    Valid(  # the reduction in another function sees another `t`
        """\
import torch
import torch.distributed as dist


def build():
    t = torch.tensor([1.0], dtype=torch.float64, device="cuda")
    return t


def sync(t):
    dist.all_reduce(t)
""",
    ),
    Valid(  # all_gather moves float64 fine (only reductions lack it)
        """\
import torch
import torch.distributed as dist
t = torch.tensor([1.0], dtype=torch.float64, device="cuda")
dist.all_gather([t], t)
""",
    ),
    Invalid(  # portable: float64 runs on CUDA and CPU, so the rewrite is only reported
        """\
import torch
import torch.distributed as dist
t = torch.tensor([1.0], dtype=torch.float64, device="cuda")
dist.all_reduce(t)
""",
        options=(("target", "portable"),),
        lines=(3,),
    ),
]

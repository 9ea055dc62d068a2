"""NPU151: the cuda-type-string rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.families.namemap import entries_for
from codemods.model.cstnodes import string_value, with_string
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_tensors.json"


# functions whose first argument names a tensor type (`"torch.cuda.FloatTensor"`)
_DEFAULT_TYPE_SETTERS = frozenset({"torch.set_default_tensor_type"})


def _type_strings() -> dict[str, dict[str, Any]]:
    return {e["cuda"]: e for e in entries_for(DATA, "NPU151")}


class TensorTypeString(Rule):
    """## What it does

    `t.type("torch.cuda.FloatTensor")`, `t.type() == "torch.cuda.…"` and `torch.set_default_tensor_type("torch.cuda.…")` use `torch.npu.…`

    ## Why

    `Tensor.type()` answers with strings such as `"torch.cuda.FloatTensor"`; on an NPU tensor it
    answers `"torch.npu.FloatTensor"`. Code that passes the CUDA string to `t.type(...)` (a cast and a
    move to the GPU at once) or compares `t.type()` with it breaks silently after the port, and
    `transfer_to_npu` does not rewrite these strings. The rule rewrites the string in exactly these
    places: the first argument (or `dtype=`) of a `.type(...)` call, an operand of a comparison
    whose other side is `x.type()` (also inside a tuple or list for `in`), and the argument of
    `torch.set_default_tensor_type(...)`, which torch_npu's typed classes accept by name as
    `"torch.npu.FloatTensor"` (deprecated since torch 2.1 on every device: `torch.set_default_dtype`
    with `torch.set_default_device("npu")` is the lasting form). The strings come from
    `codemods/data/coverage_tensors.json`; `DoubleTensor` carries NPU150's float64 warning.

    ## Example

    ```python
    # before
    h = x.type("torch.cuda.HalfTensor")
    if x.type() == "torch.cuda.FloatTensor":
        ...
    # after
    h = x.type("torch.npu.HalfTensor")
    if x.type() == "torch.npu.FloatTensor":
        ...
    ```

    ## Fix safety

    Safe: the string names the same dtype on the NPU backend. A string anywhere else (a log line, a docstring) is left alone. Suppress a line with `# npu-migrate: ignore[NPU151]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU151"
    name = "cuda-type-string"
    summary = "`t.type(\"torch.cuda.FloatTensor\")`, `t.type() == \"torch.cuda.…\"` and `set_default_tensor_type` strings use `torch.npu.…`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"torch\.cuda\.\w+Tensor"

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.mapping = _type_strings()
        self.targets: set[int] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self.targets.clear()

    def visit_Call(self, node: cst.Call) -> None:
        # `t.type("torch.cuda.X")` / `t.type(dtype="torch.cuda.X")`: the first argument is a type name
        if _is_method(node.func, "type") and node.args:
            first = node.args[0]
            if first.keyword is None or first.keyword.value == "dtype":
                self.targets.add(id(first.value))
        # `torch.set_default_tensor_type("torch.cuda.FloatTensor")`: the default type, by name
        elif self.resolve(node.func) in _DEFAULT_TYPE_SETTERS and node.args:
            self.targets.add(id(node.args[0].value))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `t.type() == "torch.cuda.X"` (either side), `t.type() in ("torch.cuda.X", ...)`
        operands = [node.left] + [target.comparator for target in node.comparisons]
        if not any(_is_type_query(op) for op in operands):
            return
        for operand in operands:
            if isinstance(operand, (cst.Tuple, cst.List, cst.Set)):
                self.targets.update(id(el.value) for el in operand.elements)
            else:
                self.targets.add(id(operand))

    def leave_SimpleString(self, original_node: cst.SimpleString,
                           updated_node: cst.SimpleString) -> cst.BaseExpression:
        if id(original_node) not in self.targets:
            return updated_node
        value = string_value(original_node)
        entry = self.mapping.get(value or "")
        if entry is None:
            return updated_node
        self.fixed(original_node, f"`\"{value}\"` → `\"{entry['npu']}\"`")
        if entry.get("message"):
            self.report(original_node, entry["message"], severity=Severity(entry.get("severity", "warning")))
        return with_string(updated_node, entry["npu"])


def _is_type_query(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and _is_method(node.func, "type") and not node.args


def _is_method(func: cst.BaseExpression, name: str) -> bool:
    return isinstance(func, cst.Attribute) and func.attr.value == name


CASES = [
    Invalid(
        """\
    import os
    import torch
    h = x.type("torch.cuda.HalfTensor")
    if x.type() == "torch.cuda.FloatTensor":
        ...
    """,
        after="""\
    import os
    import torch
    h = x.type("torch.npu.HalfTensor")
    if x.type() == "torch.npu.FloatTensor":
        ...
    """,
    ),
    Invalid(  # a ModelZoo pair: Huawei's port writes the NPU type name
        """\
    import torch
    torch.set_default_tensor_type('torch.cuda.FloatTensor')
    """,
        after="""\
    import torch
    torch.set_default_tensor_type('torch.npu.FloatTensor')
    """,
    ),
    Valid(
        """\
    import os
    import torch
    h = x.type("torch.npu.HalfTensor")
    if x.type() == "torch.npu.FloatTensor":
        ...
    """,
    ),
    Invalid(
        """\
    import torch
    z = x.type('torch.cuda.HalfTensor')
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    z = x.type('torch.npu.HalfTensor')
    """,
        codes=('NPU100', 'NPU151'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    z = x.type(dtype="torch.cuda.BFloat16Tensor")
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    z = x.type(dtype="torch.npu.BFloat16Tensor")
    """,
        codes=('NPU100', 'NPU151'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    if x.type() == "torch.cuda.FloatTensor":
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    if x.type() == "torch.npu.FloatTensor":
        pass
    """,
        codes=('NPU100', 'NPU151'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    if x.type() in ("torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"):
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    if x.type() in ("torch.npu.HalfTensor", "torch.npu.BFloat16Tensor"):
        pass
    """,
        codes=('NPU100', 'NPU151'),
        with_rules=('NPU100',),
    ),
]

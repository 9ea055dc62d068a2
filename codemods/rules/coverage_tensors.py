"""NPU150: legacy typed CUDA classes (`torch.cuda.FloatTensor`) -> `torch.npu.FloatTensor`;
NPU151: the same names as strings in `Tensor.type(...)` and in comparisons with `Tensor.type()`."""

from __future__ import annotations

from typing import Any

import libcst as cst
import libcst.matchers as m

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix, Rule
from codemods.rules.coverage_common import (NameMapRule, entries_for, name_prefilter,
                                                        string_value, with_string)

DATA = "coverage_tensors.json"


class TypedTensor(NameMapRule):
    code = "NPU150"
    name = "typed-cuda-tensor"
    summary = "`torch.cuda.FloatTensor` and the other typed CUDA classes become `torch.npu.*` (float64 flagged)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU150")


def _type_strings() -> dict[str, dict[str, Any]]:
    return {e["cuda"]: e for e in entries_for(DATA, "NPU151")}


class TensorTypeString(Rule):
    code = "NPU151"
    name = "cuda-type-string"
    summary = "`t.type(\"torch.cuda.FloatTensor\")` and `t.type() == \"torch.cuda.…\"` use `torch.npu.…`"
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
        if m.matches(node.func, m.Attribute(attr=m.Name("type"))) and node.args:
            first = node.args[0]
            if first.keyword is None or first.keyword.value == "dtype":
                self.targets.add(id(first.value))

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
    return m.matches(node, m.Call(func=m.Attribute(attr=m.Name("type")), args=[]))

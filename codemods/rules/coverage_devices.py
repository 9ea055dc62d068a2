"""NPU152: `torch.load(map_location={...})` dictionaries and callables; NPU153: device strings
in DDP/DataParallel `device_ids` lists; NPU180:
`get_device_capability()` results that are compared, indexed or unpacked (None on NPU)."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix
from codemods.rules.coverage_common import CoverageRule, string_value
from codemods.rules.device_strings import code_of, device_collection, device_expr

# functions whose `map_location` maps saved storage locations: keyword, or this position
_LOADERS = {"torch.load": 1, "torch.serialization.load": 1, "torch.jit.load": 1}
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


class MapLocation(CoverageRule):
    code = "NPU152"
    name = "map-location-dict"
    summary = "`torch.load(map_location={\"cuda:0\": ...})`: values become NPU devices, NPU keys are added"
    fix = Fix.SAFE
    needs_torch_npu = True
    severity = Severity.INFO
    # a keyword `map_location=`, or a dict or lambda as the second positional argument
    prefilter = r"map_location|load\s*\([^(),]*,\s*(?:\{|lambda)"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        position = _LOADERS.get(self.resolve(original_node.func) or "")
        if position is None or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, args)):
            if arg.star:
                return updated_node
            is_map = arg.keyword.value == "map_location" if arg.keyword else index == position
            index += arg.keyword is None
            if not is_map:
                continue
            if isinstance(arg.value, cst.Dict):
                new = self._dict(orig.value, arg.value)
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    return updated_node.with_changes(args=args)
            elif self._is_function(orig.value):
                self.report(orig.value, "map_location is a function: storages saved on a GPU reach it with "
                            "locations 'cuda:N', and it must return NPU (or CPU) storages; check it, or pass "
                            "map_location=\"npu\"")
        return updated_node

    def _is_function(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Lambda):
            return not _keeps_storage_on_cpu(node)
        if isinstance(node, cst.Name):
            return any(isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == node.value
                       for stmt in self.context.facts.tree.body)
        return False

    def _dict(self, original: cst.Dict, node: cst.Dict) -> cst.Dict:
        """Values naming CUDA devices name NPU ones; a key naming a CUDA device (where a GPU
        checkpoint's storages come from) keeps its entry and gains the same entry for the
        matching NPU device, so checkpoints saved on either load alike."""
        elements = list(node.elements)
        keys = {string_value(e.key) for e in elements if isinstance(e, cst.DictElement)}
        out: list[cst.BaseDictElement] = []
        changed = False
        for element in elements:
            if not isinstance(element, cst.DictElement):
                out.append(element)
                continue
            value = device_expr(element.value)
            if value is not None:
                self.fixed(original, f"map_location value `{code_of(element.value)}` → `{code_of(value)}`")
                element = element.with_changes(value=value)
                changed = True
            out.append(element)
            npu_key = device_expr(element.key) if isinstance(element.key, cst.SimpleString) else None
            if npu_key is not None and string_value(npu_key) not in keys:
                out[-1] = element.with_changes(comma=_COMMA)
                out.append(cst.DictElement(key=npu_key, value=element.value))
                self.fixed(original, f"map_location gains `{code_of(npu_key)}` beside "
                                     f"`{code_of(element.key)}` (for checkpoints saved on NPU)")
                changed = True
        if not changed:
            return node
        last = elements[-1]
        if out[-1] is not last:  # keep the original closing style: trailing comma or not
            out[-1] = out[-1].with_changes(comma=last.comma)
        return node.with_changes(elements=out)


# data-parallel wrappers whose `device_ids` (keyword, or this position) is a list of devices
_DEVICE_IDS = {"torch.nn.parallel.DistributedDataParallel": 1, "torch.nn.parallel.distributed.DistributedDataParallel": 1,
               "torch.nn.DataParallel": 1, "torch.nn.parallel.DataParallel": 1,
               "torch.nn.parallel.data_parallel": 2}


class DeviceIdsList(CoverageRule):
    code = "NPU153"
    name = "device-ids-list"
    summary = "CUDA device strings inside DDP/DataParallel `device_ids=[...]` lists become NPU ones"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"""device_ids|(?:DataParallel|data_parallel)\s*\([^)]*[\[(]\s*f?['"]cuda"""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        position = _DEVICE_IDS.get(self.resolve(original_node.func) or "")
        if position is None or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        index = 0
        for i, arg in enumerate(args):
            if arg.star:
                return updated_node
            hit = arg.keyword.value == "device_ids" if arg.keyword else index == position
            index += arg.keyword is None
            if hit and isinstance(arg.value, (cst.List, cst.Tuple)):
                new = device_collection(arg.value)
                if new is not None:
                    self.fixed(original_node.args[i].value,
                               f"`{code_of(arg.value)}` → `{code_of(new)}` (device_ids)")
                    args[i] = arg.with_changes(value=new)
                    return updated_node.with_changes(args=args)
        return updated_node


_CAPABILITY = frozenset({"torch.cuda.get_device_capability", "torch.npu.get_device_capability",
                         "torch_npu.npu.get_device_capability", "torch.accelerator.get_device_capability"})
_PROPERTIES = frozenset({"torch.cuda.get_device_properties", "torch.npu.get_device_properties",
                         "torch_npu.npu.get_device_properties"})
_CAPABILITY_HELP = ("returns None on NPU (unless TORCH_NPU_DEVICE_CAPABILITY=\"major.minor\" is set, "
                    "torch_npu 26.x and later)")


class DeviceCapability(CoverageRule):
    code = "NPU180"
    name = "device-capability"
    summary = "`get_device_capability()` returns None on NPU: comparing, indexing or unpacking it crashes"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = r"get_device_capability|get_device_properties"

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.used: dict[int, str] = {}  # id of an expression -> how its value is used

    def visit_Module(self, node: cst.Module) -> None:
        self.used.clear()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for operand in [node.left, *(c.comparator for c in node.comparisons)]:
            self.used.setdefault(id(operand), "compared")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.used.setdefault(id(node.value), "indexed")

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.used.setdefault(id(node.value), "unpacked")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self.used.setdefault(id(node.left), "used in arithmetic")
        self.used.setdefault(id(node.right), "used in arithmetic")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) in _CAPABILITY:
            use = self.used.get(id(original_node))
            if use:
                self.report(original_node, f"get_device_capability() {_CAPABILITY_HELP}, and here it is "
                            f"{use}: that raises TypeError. Test the feature instead "
                            "(torch.npu.is_bf16_supported(), ...) or handle None")
            else:
                self.report(original_node, f"get_device_capability() {_CAPABILITY_HELP}: check that "
                            "nothing compares or indexes its result", severity=Severity.INFO)
        return updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        # torch.cuda.get_device_properties(i).major / .minor: no compute capability on NPU
        value = original_node.value
        if (original_node.attr.value in ("major", "minor") and isinstance(value, cst.Call)
                and self.resolve(value.func) in _PROPERTIES):
            self.report(original_node, f"`.{original_node.attr.value}` of the NPU device properties is no "
                        "CUDA compute capability (only name, total_memory, L2_cache_size, cube_core_num and "
                        "vector_core_num are documented): do not gate features on it",
                        severity=Severity.WARNING if id(original_node) in self.used else Severity.INFO)
        return updated_node


def _keeps_storage_on_cpu(node: cst.Lambda) -> bool:
    """`lambda storage, loc: storage`: the common idiom that loads everything to the CPU,
    which is right on NPU too."""
    params = node.params.params
    return (len(params) >= 1 and isinstance(node.body, cst.Name)
            and node.body.value == params[0].name.value)

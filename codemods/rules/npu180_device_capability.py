"""NPU180: the device-capability rule."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from codemods.analyses.capability import CAPABILITY_CALLS, file_capabilities
from codemods.api.cases import Invalid, Valid
from codemods.api.positions import node_positions
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.astnodes import ast_dotted_parts
from npu_migrate.core.diagnostics import Severity

_CAPABILITY = CAPABILITY_CALLS


_PROPERTIES = frozenset({"torch.cuda.get_device_properties", "torch.npu.get_device_properties",
                         "torch_npu.npu.get_device_properties"})


# the fields torch_npu documents for `get_device_properties()` (fact sheet: other CUDA fields are empty)
_DOCUMENTED_FIELDS = ("name", "total_memory", "L2_cache_size", "cube_core_num", "vector_core_num")
_DOCUMENTED = ", ".join(_DOCUMENTED_FIELDS[:-1]) + " and " + _DOCUMENTED_FIELDS[-1]
_CATCHES_TYPE_ERROR = frozenset({"TypeError", "Exception", "BaseException"})
_CAPABILITY_HELP = ("returns None on NPU (unless TORCH_NPU_DEVICE_CAPABILITY=\"major.minor\" is set, "
                    "torch_npu 26.x and later)")


class DeviceCapability(CoverageRule):
    """## What it does

    `get_device_capability()` returns None on NPU: comparing, indexing or unpacking it crashes

    ## Why

    `torch.npu.get_device_capability()` returns **None** on Ascend unless `TORCH_NPU_DEVICE_CAPABILITY`
    is set (torch_npu 26.x; in 7.x it always returns None), so the common
    `torch.cuda.get_device_capability()[0] >= 8` raises `TypeError` after the port (fact sheet §2.6).
    The rule reports every call (CUDA, `torch.npu`, `torch_npu.npu` or `torch.accelerator` spelling):
    a **warning** where the result is compared, indexed, unpacked or used in arithmetic, an info note
    elsewhere; inside a `try` whose handler catches the TypeError (nanochat's FA3 probe, `except
    Exception: return None`) the warning says that the NPU then takes the fallback. `get_device_properties(i).major/.minor` is reported too, also where the properties
    are kept in a name first (`props = torch.cuda.get_device_properties(0)` ... `props.major`): those
    are not compute capabilities on NPU. Other CUDA fields read from the properties (`.multi_processor_count` sizing a Triton grid, `.gcnArchName`, `.regs_per_multiprocessor`) are warnings: torch_npu documents only name, total_memory, L2_cache_size, cube_core_num and vector_core_num, the rest is empty or missing. Gate features on what they need (`torch.npu.is_bf16_supported()`, ...)
    instead.

    ## Example

    ```python
    if torch.cuda.get_device_capability()[0] >= 8:   # warning: None on NPU, TypeError
        dtype = torch.bfloat16
    # instead
    if torch.npu.is_bf16_supported():
        dtype = torch.bfloat16
    ```

    ## Fix safety

    Diagnostic only (NPU120 still renames the call to `torch.npu.get_device_capability`). Suppress a line with `# npu-migrate: ignore[NPU180]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU180"
    supported_targets = frozenset({"npu", "portable"})
    name = "device-capability"
    summary = "`get_device_capability()` returns None on NPU: comparing, indexing or unpacking it crashes"
    fix = Fix.NONE
    severity = Severity.WARNING
    # `.field` reads of properties kept in a name sit in statements of their own
    prefilter = (r"get_device_capability|get_device_properties|\.(?:major|minor|multi_processor_count|gcnArchName"
                 r"|warp_size|regs_per_multiprocessor|max_threads_per_multi_processor|shared_memory_per_\w+"
                 r"|is_integrated|is_multi_gpu_board|uuid|pci_\w+_id|clock_rate|memory_clock_rate|memory_bus_width)\b")

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.used: dict[int, str] = {}  # id of an expression -> how its value is used
        self.kept: dict[int, str] = {}  # id of an assigned value -> the name it is kept in
        self._properties: frozenset[str] | None = None
        self._capability_uses: dict[str, tuple[str, int]] | None = None

    @property
    def properties(self) -> frozenset[str]:
        """Names the file assigns a get_device_properties(...) result (its `ast`, once per file: the
        engine may hand the assignment and the `.major` read over in different pieces)."""
        if self._properties is None:
            facts = self.context.facts
            self._properties = frozenset(
                target.id for node in self.context.model.of_type(ast.Assign)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and (parts := ast_dotted_parts(node.value.func)) and facts.qualify(parts) in _PROPERTIES
                for target in node.targets if isinstance(target, ast.Name))
        return self._properties

    @property
    def capability_uses(self) -> dict[str, tuple[str, int]]:
        """Names the file assigns a get_device_capability() result, each with the first way it is
        then used that breaks on None and that line: the file's `ast`, once per file, as for
        `properties`."""
        if self._capability_uses is None:
            self._capability_uses = self.context.model.derived(file_capabilities)
        return self._capability_uses

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
        elif len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.kept[id(node.value)] = node.targets[0].target.value

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self.used.setdefault(id(node.left), "used in arithmetic")
        self.used.setdefault(id(node.right), "used in arithmetic")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) in _CAPABILITY:
            use = self.used.get(id(original_node))
            name = self.kept.get(id(original_node))
            if not use and name in self.capability_uses:
                how, line = self.capability_uses[name]
                use = f"kept in `{name}`, which is {how} on line {line}"
            caught = self._caught_at(original_node) if use else None
            if use and caught:
                self.report(original_node, f"get_device_capability() {_CAPABILITY_HELP}, and here it is "
                            f"{use}: that raises TypeError, which the `{caught}` around it catches, so "
                            "on NPU this code takes its fallback; if the NPU should have the feature, test it "
                            "instead (torch.npu.is_bf16_supported(), ...)")
            elif use:
                self.report(original_node, f"get_device_capability() {_CAPABILITY_HELP}, and here it is "
                            f"{use}: that raises TypeError. Test the feature instead "
                            "(torch.npu.is_bf16_supported(), ...) or handle None")
            else:
                self.report(original_node, f"get_device_capability() {_CAPABILITY_HELP}: check that "
                            "nothing compares or indexes its result", severity=Severity.INFO)
        return updated_node

    def _caught_at(self, node: cst.CSTNode) -> str | None:
        """The handler (`except Exception`, `except TypeError`, ...) of a `try` around `node` that catches the
        TypeError (nanochat's FA3 probe: `try: major, _ = torch.cuda.get_device_capability()` ...
        `except Exception: return None`), or None. Found in the file's `ast` by line."""
        module = self.context.module
        if module is None:
            return None
        line = node_positions(module, [node])[id(node)][0] + self.context.line_offset
        for statement in self.context.model.of_type(ast.Try):  # in `ast.walk`'s order
            if not isinstance(statement, ast.Try) or not statement.body:
                continue
            if not statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
                continue
            for handler in statement.handlers:
                if handler.type is None:
                    return "except"
                if any(isinstance(n, ast.Name) and n.id in _CATCHES_TYPE_ERROR for n in ast.walk(handler.type)):
                    return f"except {ast.unparse(handler.type)}"
        return None

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        # torch.cuda.get_device_properties(i).major / .minor: no compute capability on NPU
        value = original_node.value
        properties = ((isinstance(value, cst.Call) and self.resolve(value.func) in _PROPERTIES)
                      or (isinstance(value, cst.Name) and value.value in self.properties))
        field = original_node.attr.value
        if not properties or field in _DOCUMENTED_FIELDS or field.startswith("_"):
            return updated_node
        if field in ("major", "minor"):
            self.report(original_node, f"`.{field}` of the NPU device properties is no "
                        f"CUDA compute capability (only {_DOCUMENTED} are documented): do not gate features on it",
                        severity=Severity.WARNING if id(original_node) in self.used else Severity.INFO)
        else:  # a GPU's shape (SM count, registers, warps): sizing a kernel grid on an empty field
            self.report(original_node, f"`.{field}` of the NPU device properties: torch_npu documents only "
                        f"{_DOCUMENTED}; the other CUDA fields are empty or missing, depending on the "
                        "release: do not size work on it (the NPU's cores: `cube_core_num`, `vector_core_num`)")
        return updated_node


CASES = [
    Invalid(  # mamba's Triton wrappers size their grid on the SM count
        """\
        import torch
        sm_count = torch.cuda.get_device_properties(x.device).multi_processor_count
        props = torch.cuda.get_device_properties(0)
        arch = props.gcnArchName
        memory = props.total_memory
        """,
        lines=(2, 4),
    ),
    Invalid(
        """\
import torch
props = torch.cuda.get_device_properties(torch.device("cuda"))
version = f"{props.major}.{props.minor}"
""",
    ),
    Invalid(
        """\
import os
import torch
if torch.cuda.get_device_capability()[0] >= 8:   # warning: None on NPU, TypeError
    dtype = torch.bfloat16
""",
    ),
    # kept in a name first, then compared (nanochat's compute-dtype probe): a warning at the call
    Invalid(
        """\
import torch
capability = torch.cuda.get_device_capability()
if capability >= (8, 0):
    dtype = torch.bfloat16
""",
    ),
    # unpacked inside a try whose handler catches it (nanochat's FA3 probe): the message says so
    Invalid(
        """\
import torch
def load():
    try:
        major, _ = torch.cuda.get_device_capability()
        return major
    except Exception:
        return None
""",
    ),
    # kept and only tested against None: nothing breaks, an info note
    Invalid(
        """\
import torch
capability = torch.cuda.get_device_capability()
if capability is not None:
    print(capability)
""",
    ),
    Valid(
        """\
import os
import torch
if torch.npu.is_bf16_supported():
    dtype = torch.bfloat16
""",
    ),
]

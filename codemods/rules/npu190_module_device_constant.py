"""NPU190: the module-device-constant rule."""

from __future__ import annotations

import ast
import re
from typing import Any

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.cases import Invalid, Valid
from codemods.framework.devices import (
    DevicePositions,
    device_expr,
    device_positions,
)
from codemods.framework.facts import ast_dotted_parts
from codemods.framework.namemap import CoverageRule
from codemods.framework.portable import generic_device_value
from codemods.framework.nodes import string_value
from npu_migrate.core.diagnostics import Severity

_CUDA = re.compile(r"cuda(:\d+)?")


_LOGGING = frozenset({"print", "debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


_ADD_ARGUMENT = "add_argument"


def _qualified(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts = ast_dotted_parts(node)
    if not parts or parts[0] not in aliases:
        return None
    return ".".join([aliases[parts[0]], *parts[1:]])


def _device_named(node: ast.expr, names: frozenset[str]) -> bool:
    """The ast twin of NPU104's `is_device_name`: `device`, `x.device`, `x.device.type`, `str(device)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" \
            and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Name):
        return node.id.lower() in names
    if not isinstance(node, ast.Attribute):
        return False
    if node.attr.lower() in names:
        return True
    if node.attr != "type":
        return False
    owner = node.value
    if isinstance(owner, ast.Call):
        owner = owner.func
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return "dev" in name.lower()


class _Uses:
    """How a module constant is used across the file."""

    def __init__(self) -> None:
        self.device = 0
        self.blocking: list[tuple[int, str]] = []  # (line, what)
        self.rebound = False


class ConstantFlow:
    """Classifies every use of the file's CUDA-valued module constants, once per file."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str], constants: dict[str, object],
                 table: DevicePositions) -> None:
        self.aliases = aliases
        self.table = table
        self.candidates = {name for name, value in constants.items()
                           if isinstance(value, str) and _CUDA.fullmatch(value)}
        self.uses = {name: _Uses() for name in self.candidates}
        if not self.candidates:
            return
        self.parents: dict[int, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in self.candidates:
                self._classify_name(node)
            elif isinstance(node, ast.arg) and node.arg in self.candidates:
                self.uses[node.arg].rebound = True  # a parameter shadows it somewhere
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    if name in self.candidates:
                        self.uses[name].rebound = True

    def _classify_name(self, node: ast.Name) -> None:
        uses = self.uses[node.id]
        if not isinstance(node.ctx, ast.Load):
            parent = self.parents.get(id(node))
            # the one module-level assignment is the definition itself
            if not (isinstance(parent, ast.Assign) and self.parents.get(id(parent)) is not None
                    and isinstance(self.parents[id(parent)], ast.Module)):
                uses.rebound = True
            return
        verdict = self._verdict(node, node.id)
        if verdict == "device":
            uses.device += 1
        elif verdict != "neutral":
            uses.blocking.append((node.lineno, verdict))

    def _verdict(self, node: ast.expr, name: str) -> str:
        """'device', 'neutral' (logging) or a description of a use that is not a device."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.FormattedValue):
            joined = self.parents.get(id(parent))
            if isinstance(joined, ast.JoinedStr) and self._device_template(joined, parent):
                return self._verdict(joined, name)
            return self._logged(joined) or "formatted into a string"
        if isinstance(parent, ast.IfExp) and node is not parent.test:
            return self._verdict(parent, name)
        if isinstance(parent, ast.keyword):
            call = self.parents.get(id(parent))
            if parent.arg in self.table.keywords:
                return "device"
            if isinstance(call, ast.Call):
                spec = self.table.functions.get(_qualified(call.func, self.aliases) or "")
                if spec and parent.arg in spec[1]:
                    return "device"
                if parent.arg in ("default", "const", "choices") and self._device_option(call):
                    return "device"
                return self._logged(call) or f"passed as `{parent.arg}=`"
        if isinstance(parent, ast.Call) and node in parent.args:
            index = parent.args.index(node)
            qualified = _qualified(parent.func, self.aliases)
            spec = self.table.functions.get(qualified or "")
            if spec and index in spec[0]:
                return "device"
            if isinstance(parent.func, ast.Attribute) and qualified is None \
                    and index in self.table.methods.get(parent.func.attr, ()):
                return "device"
            return self._logged(parent) or "passed to a function that does not take a device there"
        if isinstance(parent, (ast.List, ast.Tuple, ast.Set)):
            grand = self.parents.get(id(parent))
            if isinstance(grand, ast.Compare):
                return self._compare_verdict(grand, parent, name)
            if isinstance(grand, ast.keyword) and grand.arg == "choices":
                return self._verdict(parent, name)
        if isinstance(parent, ast.Compare):
            return self._compare_verdict(parent, node, name)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(_device_named(t, self.table.names) for t in targets):
                return "device"
            return "assigned to a name that is not a device"
        if isinstance(parent, ast.arguments):
            return "device" if self._device_default(parent, node) else "a parameter default"
        if isinstance(parent, ast.Dict) and node in parent.values:
            key = parent.keys[parent.values.index(node)]
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and (
                    key.value in self.table.keywords or key.value.lower() in self.table.names):
                return "device"
            return "stored in a dict"
        return f"used as `{type(parent).__name__}`" if parent is not None else "used"

    def _compare_verdict(self, compare: ast.Compare, operand: ast.expr, name: str) -> str:
        others = [o for o in [compare.left, *compare.comparators] if o is not operand]
        for other in others:
            if _device_named(other, self.table.names):
                return "device"
            literal = other.value if isinstance(other, ast.Constant) else None
            if isinstance(literal, str) and (not _CUDA.fullmatch(literal) or name.lower() in self.table.names):
                return "device"  # NPU104 rewrites the "cuda" literal because the name says device
        return "compared with something that is not a device"

    def _device_template(self, joined: ast.JoinedStr, part: ast.FormattedValue) -> bool:
        """f"{DEVICE}" or f"{DEVICE}:{rank}" (the constant first, then only `:N`)."""
        values = joined.values
        if not values or values[0] is not part:
            return False
        rest = values[1:]
        return not rest or (len(rest) == 2 and isinstance(rest[0], ast.Constant) and rest[0].value == ":"
                            and isinstance(rest[1], ast.FormattedValue))

    def _device_option(self, call: ast.Call) -> bool:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == _ADD_ARGUMENT):
            return False
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                flag = arg.value.lstrip("-").replace("-", "_").lower()
                if flag == "device" or flag.startswith("device_") or flag.endswith("_device"):
                    return True
        return False

    def _device_default(self, arguments: ast.arguments, node: ast.expr) -> bool:
        positional = arguments.posonlyargs + arguments.args
        for arg, default in zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults):
            if default is node:
                return arg.arg.lower() in self.table.names
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if default is node:
                return arg.arg.lower() in self.table.names
        return False

    def _logged(self, call: ast.AST | None) -> str | None:
        while call is not None and not isinstance(call, ast.Call):
            if isinstance(call, (ast.stmt, ast.Lambda)):
                return None
            call = self.parents.get(id(call))
        if call is None:
            return None
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return "neutral" if name in _LOGGING else None

    def decision(self, name: str) -> tuple[str, str]:
        """('rewrite', why) or ('report', why) or ('keep', '')."""
        uses = self.uses.get(name)
        if uses is None or uses.rebound:
            return "keep", ""
        if uses.blocking:
            line, what = uses.blocking[0]
            return "report", f"line {line}: {what}"
        if uses.device:
            return "rewrite", f"all {uses.device} use(s) in this file are devices"
        lowered = name.lower()
        if lowered in self.table.names or "device" in lowered:
            return "rewrite", "a device name not used in this file (a setting for other modules)"
        return "keep", ""


class ModuleDeviceConstant(CoverageRule):
    """## What it does

    `DEVICE = "cuda"` at module level becomes `"npu"` when every use of it is a device

    ## Why

    A module-level constant such as `DEVICE = "cuda"` is no device position by itself, so NPU103 does
    not touch it (it handles device-named assignments inside functions and classes); `transfer_to_npu`
    only rewrites strings at the moment they reach a wrapped function. The rule follows the constant
    through the whole file (Python's `ast`, once per file, so the decision does not depend on which
    chunk the engine parses) and rewrites the assignment when it is assigned once, never shadowed
    (`global`, a parameter of the same name), and **every** use is a device: a device position of the
    device table (`codemods/data/device_positions*.json`: keywords such as `device=`, positions of
    `torch.device`, `.to()`, ...), an `f"{DEVICE}:{rank}"` template there, a comparison with a device
    or (under a device-like name, which NPU104 rewrites too) with `"cuda"`, a device-named assignment,
    parameter default or dict entry, or an argparse `--device` default/choice. Logging and `print`
    neither count nor block. A constant no code in the file uses is rewritten only when its name says
    device (a settings module). Any other use keeps the constant and is reported with its line.

    ## Example

    ```python
    # before
    DEVICE = "cuda"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")

    CKPT = "cuda"
    path = os.path.join("ckpt", CKPT)
    # after
    DEVICE = "npu"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")

    CKPT = "cuda"
    path = os.path.join("ckpt", CKPT)    # reported: the constant also names a path
    ```

    ## Fix safety

    Safe: rewritten only when every use in the file is a device. Uses in other modules (`from config import DEVICE`) cannot be seen; a device-named constant unused in its own file is assumed to be a setting for them. Suppress a line with `# npu-migrate: ignore[NPU190]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the constant becomes the run's device, `DEVICE.type` (`f"{DEVICE.type}:1"` for an index; `PORTABLE_DEVICE` where the file binds `DEVICE` itself), when every use is a device and the file imports torch; otherwise reported
    """

    code = "NPU190"
    name = "module-device-constant"
    summary = "`DEVICE = \"cuda\"` at module level becomes `\"npu\"` when every use of it is a device"
    supported_targets = frozenset({"npu", "portable"})
    fix = Fix.SAFE
    # `import torch_npu` is asked for only where the file uses torch: a settings module holding
    # nothing but `DEVICE = "cuda"` should not start importing the NPU backend
    needs_torch_npu = False
    severity = Severity.WARNING
    prefilter = r"""['"]cuda(?::\d+)?['"]"""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._flow: ConstantFlow | None = None
        self.top: set[int] = set()

    @property
    def flow(self) -> ConstantFlow:
        if self._flow is None:
            self._flow = ConstantFlow(self.context.facts.tree, self.context.facts.aliases,
                                      self.context.facts.constants, device_positions())
        return self._flow

    def visit_Module(self, node: cst.Module) -> None:
        # A chunk's top-level statement is a module-level one, or a statement of a function or
        # class body handed over on its own; only a name the whole file assigns exactly once,
        # at module level (facts.constants), can be the former, so the check below is exact.
        self.top = {id(small) for stmt in node.body if isinstance(stmt, cst.SimpleStatementLine)
                    for small in stmt.body}

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> Any:
        if id(original_node) not in self.top or len(original_node.targets) != 1:
            return updated_node
        target = original_node.targets[0].target
        if not isinstance(target, cst.Name) or target.value not in self.flow.candidates:
            return updated_node
        if string_value(original_node.value) != self.context.facts.constants.get(target.value):
            return updated_node
        action, why = self.flow.decision(target.value)
        if action == "report":
            to = "`DEVICE.type`" if self.target == "portable" else "\"npu\""
            self.report(original_node, f"`{target.value}` holds a CUDA device but is not only used as one "
                        f"({why}): set it to {to} by hand if that use is a device too")
            return updated_node
        if action != "rewrite":
            return updated_node
        if self.target == "portable":
            return self._portable(original_node, updated_node, target.value, why)
        new = device_expr(updated_node.value)
        if new is None:
            return updated_node
        self.fixed(original_node, f"`{target.value}` → \"npu\" device ({why})")
        if any(t == "torch" or t.startswith("torch.") for t in self.context.facts.aliases.values()):
            self.context.require_import("torch_npu")
        return updated_node.with_changes(value=new)


    def _portable(self, original: cst.Assign, updated: cst.Assign, name: str, why: str) -> Any:
        """`device = "cuda"` -> `device = DEVICE.type`: the run's device, the CPU without an
        accelerator. A file that does not import torch (a settings module) is reported: the
        device value would make it import torch."""
        uses_torch = any(t == "torch" or t.startswith("torch.") for t in self.context.facts.aliases.values())
        new = generic_device_value(self.context, updated.value) if uses_torch else None
        if new is None:
            self.report(original, f"`{name}` holds a CUDA device ({why}); under --target portable set it "
                                  "from `torch.accelerator.current_accelerator()` by hand")
            return updated
        self.fixed(original, f"`{name}` → the run's device ({why})")
        return updated.with_changes(value=new)


CASES = [
    Invalid(  # the run's device: the GPU, the NPU, or the CPU where there is no accelerator
        """\
    import torch
    device = "cuda"
    DEVICE = "cuda:0"
    x = torch.zeros(8, device=device)
    y = torch.ones(2).to(DEVICE)
""",
        after="""\
    import torch
    PORTABLE_DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
    device = PORTABLE_DEVICE.type
    DEVICE = f"{PORTABLE_DEVICE.type}:0"
    x = torch.zeros(8, device=device)
    y = torch.ones(2).to(DEVICE)
""",
        codes=("NPU100", "NPU190"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a settings module without torch: reported, no torch import is added
        """\
    DEVICE = "cuda"
    def place(x):
        return x.to(DEVICE)
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
    import os
    import torch
    DEVICE = "cuda"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")
""",
        after="""\
    import os
    import torch
    import torch_npu  # noqa: F401
    DEVICE = "npu"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")
""",
        codes=('NPU100', 'NPU190'),
    ),
    Valid(
        """\
    import os
    import torch
    import torch_npu  # noqa: F401
    DEVICE = "npu"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")
""",
    ),
]

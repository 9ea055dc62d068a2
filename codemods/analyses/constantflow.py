"""Module-level CUDA device constants (`DEVICE = "cuda"`) and what the file does with them.

`ConstantFlow` classifies every use of each constant once per file (`ast`) and decides whether it
can become the NPU device (NPU190 rewrites it then). `kept_device_bindings` tells NPU104 which
device-named module-level names keep their CUDA value (no rule rewrites it): a comparison of
such a name with "cuda" must not become one with "npu", or the two would no longer meet.
"""

from __future__ import annotations

import ast
import re

from codemods.analyses.devices import DevicePositions
from codemods.analyses.devicevalues import FileFlow, device_places, literal_root
from codemods.model.astnodes import qualified_name
from codemods.model.filemodel import FileModel

_CUDA = re.compile(r"cuda(:\d+)?")


_LOGGING = frozenset({"print", "debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


_ADD_ARGUMENT = "add_argument"



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

    def __init__(self, model: FileModel, table: DevicePositions) -> None:
        """Read through `model.derived(ConstantFlow, table)`: NPU190, NPU104 and NPU511 share it."""
        self.aliases = model.facts.aliases
        self.table = table
        self.candidates = {name for name, value in model.facts.constants.items()
                           if isinstance(value, str) and _CUDA.fullmatch(value)}
        self.uses = {name: _Uses() for name in self.candidates}
        if not self.candidates:
            return
        self.parents = model.parents
        for node in model.of_type(ast.Name, ast.arg, ast.Global, ast.Nonlocal):
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
                spec = self.table.functions.get(qualified_name(call.func, self.aliases) or "")
                if spec and parent.arg in spec[1]:
                    return "device"
                if parent.arg in ("default", "const", "choices") and self._device_option(call):
                    return "device"
                return self._logged(call) or f"passed as `{parent.arg}=`"
        if isinstance(parent, ast.Call) and node in parent.args:
            index = parent.args.index(node)
            qualified = qualified_name(parent.func, self.aliases)
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
        for arg, keyword_default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if keyword_default is node:
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


def _module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run at module level: the body and the blocks of its `if`/`try`/`with`/
    loops, not function or class bodies."""
    found: list[ast.stmt] = []
    for stmt in body:
        found.append(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            found += _module_statements(getattr(stmt, field_name, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            found += _module_statements(handler.body)
    return found


def kept_device_bindings(model: FileModel, table: DevicePositions) -> dict[str, int]:
    """Device-named names (`device`, `dev`, ...) bound at module level to a CUDA device string
    that no rule rewrites: name -> line of the string. A constant stays unless NPU190 rewrites
    it; a name bound more than once (`if torch.cuda.is_available(): device = "cuda"`) stays
    unless every use of its value is a device (NPU500's proof)."""
    bound: dict[str, list[ast.expr]] = {}
    for stmt in _module_statements(model.tree.body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
            if isinstance(stmt, ast.AnnAssign) else []
        value = getattr(stmt, "value", None)
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id.lower() in table.names \
                and isinstance(value, ast.expr) and literal_root(value) is not None:
            bound.setdefault(targets[0].id, []).append(value)
    if not bound:
        return {}
    kept: dict[str, int] = {}
    constants = model.derived(ConstantFlow, table)
    proven: set[tuple[int, int]] | None = None
    for name, values in bound.items():
        if name in constants.candidates:
            if constants.decision(name)[0] != "rewrite":
                kept[name] = values[0].lineno
            continue
        if proven is None:
            flow = FileFlow(model.tree, model.facts, device_places(), {}, table.names)
            proven = {(f.line, f.col) for f in flow.findings() if f.proven}
        stays = [v for v in values if (v.lineno, v.col_offset + 1) not in proven]
        if stays:
            kept[name] = stays[0].lineno
    return kept


def binds_in_scope(tree: ast.Module, line: int, name: str) -> bool:
    """Whether a function around `line` binds `name` itself (a parameter, an assignment, a loop
    target), so that `name` there is not the module-level one."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        arguments = node.args
        if name in {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                    arguments.vararg, arguments.kwarg] if a is not None}:
            return True
        body = node.body if isinstance(node.body, list) else [node.body]
        for inner in (n for stmt in body for n in ast.walk(stmt)):
            if isinstance(inner, ast.Name) and inner.id == name and not isinstance(inner.ctx, ast.Load):
                return True
            if isinstance(inner, (ast.Global, ast.Nonlocal)) and name in inner.names:
                return False
    return False

"""NPU103-NPU105: CUDA device strings become NPU device strings, in device positions only.

A string is rewritten only where the code proves it names a device: an argument the device
table calls a device (`codemods/data/device_positions*.json`), a branch of
`... if torch.cuda.is_available() else ...`, a comparison against a device-valued expression,
or the default and choices of an argparse `--device` option. Anywhere else (log messages,
paths such as "cuda_model.pt", docstrings, flag names such as `--no-cuda`) it stays.
Only the exact forms `cuda` and `cuda:N` are rewritten (also as f-strings, `%` and
`.format` templates); a string in a device position that mentions CUDA in any other way is
reported instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix, Rule

DATA = Path(__file__).resolve().parent.parent / "data"
PREFILTER = r"""['"]cuda\b"""

_PLAIN = re.compile(r"cuda(:\d+)?")
_PERCENT = re.compile(r"cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis])")
_FORMAT = re.compile(r"cuda:\{[^{}]*\}")
_EMPTY_MODULE = cst.Module([])


@dataclass(frozen=True)
class DevicePositions:
    """The merged device-position table (see the `schema` key of device_positions.json)."""

    keywords: frozenset[str]
    functions: dict[str, tuple[frozenset[int], frozenset[str]]]
    methods: dict[str, frozenset[int]]
    names: frozenset[str]
    skip_functions: frozenset[str]


@cache
def device_positions() -> DevicePositions:
    """Union of every `device_positions*.json`, so other rule families add positions in files
    of their own."""
    return load_positions(sorted(DATA.glob("device_positions*.json")))


def load_positions(paths: Iterable[Path]) -> DevicePositions:
    keywords: set[str] = set()
    functions: dict[str, tuple[set[int], set[str]]] = {}
    methods: dict[str, set[int]] = {}
    names: set[str] = set()
    skip: set[str] = set()
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        keywords.update(data.get("keywords", ()))
        for name, spec in data.get("functions", {}).items():
            positions, kwargs = functions.setdefault(name, (set(), set()))
            positions.update(spec.get("positions", ()))
            kwargs.update(spec.get("keywords", ()))
        for name, positions in data.get("methods", {}).items():
            methods.setdefault(name, set()).update(positions)
        names.update(data.get("names", ()))
        skip.update(data.get("skip_functions", ()))
    return DevicePositions(
        frozenset(keywords),
        {k: (frozenset(p), frozenset(kw)) for k, (p, kw) in functions.items()},
        {k: frozenset(v) for k, v in methods.items()},
        frozenset(names), frozenset(skip))


# -- string forms ---------------------------------------------------------------------------

def code_of(node: cst.CSTNode) -> str:
    return _EMPTY_MODULE.code_for_node(node)


def _swap_string(node: cst.SimpleString, pattern: re.Pattern[str]) -> cst.SimpleString | None:
    if "b" in node.prefix.lower():
        return None
    raw = node.raw_value
    if not pattern.fullmatch(raw):
        return None
    return node.with_changes(value=f"{node.prefix}{node.quote}npu{raw[4:]}{node.quote}")


def _swap_fstring(node: cst.FormattedString) -> cst.FormattedString | None:
    """f"cuda", f"cuda:{i}" (any expression, any format spec) -> npu."""
    if "b" in node.prefix.lower() or not node.parts:
        return None
    first, rest = node.parts[0], node.parts[1:]
    if not isinstance(first, cst.FormattedStringText):
        return None
    exact = first.value == "cuda" and not rest
    indexed = (first.value == "cuda:" and len(rest) == 1
               and isinstance(rest[0], cst.FormattedStringExpression))
    if not (exact or indexed):
        return None
    return node.with_changes(parts=[first.with_changes(value="npu" + first.value[4:]), *rest])


def device_expr(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The NPU form of a device-valued expression, or None when it holds no CUDA device string
    this module knows how to rewrite."""
    if isinstance(node, cst.SimpleString):
        return _swap_string(node, _PLAIN)
    if isinstance(node, cst.FormattedString):
        return _swap_fstring(node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.left, cst.SimpleString):
        if isinstance(node.operator, cst.Modulo):
            left = _swap_string(node.left, _PERCENT)
        elif isinstance(node.operator, cst.Add) and node.left.raw_value == "cuda:":
            left = _swap_string(node.left, re.compile("cuda:"))
        else:
            left = None
        return node.with_changes(left=left) if left is not None else None
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "format" and isinstance(node.func.value, cst.SimpleString)):
        template = _swap_string(node.func.value, _FORMAT)
        if template is None:
            return None
        return node.with_changes(func=node.func.with_changes(value=template))
    if isinstance(node, cst.IfExp):
        body, orelse = device_expr(node.body), device_expr(node.orelse)
        if body is None and orelse is None:
            return None
        return node.with_changes(body=body or node.body, orelse=orelse or node.orelse)
    return None


def mentions_cuda(node: cst.BaseExpression) -> bool:
    """Cheap test: does this expression spell a CUDA string at its top (where device_expr looks)?"""
    if isinstance(node, cst.SimpleString):
        return "cuda" in node.value
    if isinstance(node, cst.FormattedString):
        return any(isinstance(p, cst.FormattedStringText) and "cuda" in p.value for p in node.parts)
    if isinstance(node, cst.BinaryOperation):
        return mentions_cuda(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return isinstance(node.func.value, cst.SimpleString) and "cuda" in node.func.value.value
    if isinstance(node, cst.IfExp):
        return mentions_cuda(node.body) or mentions_cuda(node.orelse)
    return False


def device_collection(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """A device string, or a tuple/list/set of them (`in ("cuda", "cpu")`, argparse choices)."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        elements, changed = [], False
        for element in node.elements:
            new = device_expr(element.value) if isinstance(element, cst.Element) else None
            changed |= new is not None
            elements.append(element.with_changes(value=new) if new is not None else element)
        return node.with_changes(elements=elements) if changed else None
    return device_expr(node)


def is_device_name(node: cst.BaseExpression, names: frozenset[str]) -> bool:
    """`device`, `self.device`, `x.device.type`, `str(device)`, `torch.device(...).type`: an
    expression whose spelling says it holds a device or a device type."""
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str"
            and len(node.args) == 1):
        node = node.args[0].value
    if isinstance(node, cst.Name):
        return node.value.lower() in names
    if not isinstance(node, cst.Attribute):
        return False
    last = node.attr.value
    if last.lower() in names:
        return True
    if last != "type":
        return False
    owner = node.value
    if isinstance(owner, cst.Call):
        owner = owner.func
    if isinstance(owner, cst.Attribute):
        owner = owner.attr
    return isinstance(owner, cst.Name) and "dev" in owner.value.lower()


# -- shared plumbing --------------------------------------------------------------------------

class _DeviceRule(Rule):
    fix = Fix.SAFE
    prefilter = PREFILTER
    needs_torch_npu = True
    severity = Severity.WARNING

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self.table = device_positions()

    def swap(self, original: cst.BaseExpression, updated: cst.BaseExpression, where: str,
             collection: bool = False) -> cst.BaseExpression:
        """Rewrite one device position; record the edit, or report a CUDA string we cannot
        prove to be a plain device string."""
        new = device_collection(updated) if collection else device_expr(updated)
        if new is None:
            if self._doubtful(updated, collection):
                self.report(original, f"`{code_of(original)}` in {where} mentions CUDA but is no "
                                      "plain `cuda`/`cuda:N` device string: port it by hand")
            return updated
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` ({where})")
        return new

    @staticmethod
    def _doubtful(node: cst.BaseExpression, collection: bool) -> bool:
        if collection and isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return any(isinstance(e, cst.Element) and mentions_cuda(e.value) for e in node.elements)
        return mentions_cuda(node)


class DeviceString(_DeviceRule):
    code = "NPU103"
    name = "device-string"
    summary = "`\"cuda\"`/`\"cuda:N\"` device strings in device positions become `\"npu\"`/`\"npu:N\"`"

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._depth = 0  # > 0 inside a function or class body
        self._top_starts: frozenset[int] | None = None

    def _module_level(self) -> bool:
        """Whether the statement being looked at is a module-level one. The engine may hand us
        a statement of a function body on its own: such a piece starts on a line where no
        top-level statement starts."""
        if self._depth:
            return False
        if self._top_starts is None:
            body = self.context.facts.tree.body
            self._top_starts = frozenset(
                [1] + [min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", ())]) for s in body])
        return self.context.line_offset + 1 in self._top_starts

    # -- calls: keywords of any call, positions of known functions and methods ---------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not any(mentions_cuda(arg.value) for arg in updated_node.args):
            return updated_node
        if len(original_node.args) != len(updated_node.args):
            return updated_node  # another rule reshaped the call; positions no longer line up
        positions, keywords, where = self._positions_of(original_node)
        if positions is None:
            return updated_node
        args = list(updated_node.args)
        changed = False
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.star:
                if arg.star == "*":
                    index = -1_000_000  # positions after *args are unknown
                continue
            if arg.keyword is None:
                hit = index in positions
                index += 1
            else:
                hit = arg.keyword.value in keywords or arg.keyword.value in self.table.keywords
            if not hit or not mentions_cuda(arg.value):
                continue
            label = f"`{arg.keyword.value}=` of {where}" if arg.keyword else f"device argument of {where}"
            new_value = self.swap(orig.value, arg.value, label)
            if new_value is not arg.value:
                args[i] = arg.with_changes(value=new_value)
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    def _positions_of(self, call: cst.Call) -> tuple[frozenset[int] | None, frozenset[str], str]:
        func = call.func
        qualified = self.resolve(func)
        if qualified in self.table.skip_functions:
            return None, frozenset(), ""
        if qualified in self.table.functions:
            positions, keywords = self.table.functions[qualified]
            return positions, keywords, f"`{qualified}()`"
        if isinstance(func, cst.Attribute):
            tail = func.attr.value
            where = f"`{qualified}()`" if qualified else f"`.{tail}()`"
            return self.table.methods.get(tail, frozenset()), frozenset(), where
        name = func.value if isinstance(func, cst.Name) else "a call"
        return frozenset(), frozenset(), f"`{name}()`"

    # -- `... if torch.cuda.is_available() else ...` anywhere -----------------------------------
    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if not (mentions_cuda(updated_node.body) or mentions_cuda(updated_node.orelse)):
            return updated_node
        if self._tests_availability(original_node.test):
            return self.swap(original_node, updated_node, "a branch chosen by `is_available()`")
        if _device_choice(original_node) and _compares_with_cuda(original_node.test):
            # NPU104 rewrites the test (`'cuda' in device`); the value must follow it
            return self.swap(original_node, updated_node, "a device chosen by a device comparison")
        return updated_node

    def _tests_availability(self, test: cst.BaseExpression) -> bool:
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                if self.resolve(node.func) in _AVAILABILITY:
                    return True
            elif isinstance(node, cst.UnaryOperation):
                stack.append(node.expression)
            elif isinstance(node, cst.BooleanOperation):
                stack += [node.left, node.right]
        return False

    # -- names that hold a device: local assignments, parameter defaults, dict values ----------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self._depth -= 1
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self._depth -= 1
        return updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        # module-level constants (`DEVICE = "cuda"`) are followed through their uses elsewhere
        if not mentions_cuda(updated_node.value) or self._module_level():
            return updated_node
        if not all(is_device_name(t.target, self.table.names) for t in original_node.targets):
            return updated_node
        value = self.swap(original_node.value, updated_node.value, "an assignment to a device name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_AnnAssign(self, original_node: cst.AnnAssign,
                        updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if (updated_node.value is None or original_node.value is None
                or not mentions_cuda(updated_node.value)
                or not is_device_name(original_node.target, self.table.names) or self._module_level()):
            return updated_node
        value = self.swap(original_node.value, updated_node.value, "an assignment to a device name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if (updated_node.default is None or original_node.default is None
                or updated_node.name.value.lower() not in self.table.names
                or not mentions_cuda(updated_node.default)):
            return updated_node
        value = self.swap(original_node.default, updated_node.default, "a device parameter default")
        return updated_node.with_changes(default=value) if value is not updated_node.default else updated_node

    def leave_DictElement(self, original_node: cst.DictElement,
                          updated_node: cst.DictElement) -> cst.DictElement:
        key = updated_node.key
        if not (isinstance(key, cst.SimpleString) and mentions_cuda(updated_node.value)):
            return updated_node
        name = key.raw_value
        if name not in self.table.keywords and name.lower() not in self.table.names:
            return updated_node
        value = self.swap(original_node.value, updated_node.value, f"the `{name}` entry")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node


_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.npu.is_available"})
_OTHER_DEVICES = frozenset({"cpu", "mps", "xpu", "meta"})
_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")


def _compares_with_cuda(test: cst.BaseExpression) -> bool:
    """Whether the condition compares something with a `cuda` device string literal."""
    if isinstance(test, cst.BooleanOperation):
        return _compares_with_cuda(test.left) or _compares_with_cuda(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _compares_with_cuda(test.expression)
    if not isinstance(test, cst.Comparison):
        return False
    operands = [test.left] + [c.comparator for c in test.comparisons]
    return any(isinstance(o, cst.SimpleString) and isinstance(o.evaluated_value, str)
               and _CUDA_DEVICE.fullmatch(o.evaluated_value) for o in operands)


def _device_choice(node: cst.IfExp) -> bool:
    """`"cuda" if ... else "cpu"` (either order): a string literal that can only be a device."""
    values = []
    for branch in (node.body, node.orelse):
        if not isinstance(branch, cst.SimpleString) or "b" in branch.prefix.lower():
            return False
        values.append(branch.evaluated_value)
    return any(isinstance(v, str) and _CUDA_DEVICE.fullmatch(v) for v in values) and any(
        v in _OTHER_DEVICES for v in values)
_COMPARE = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


class DeviceComparison(_DeviceRule):
    code = "NPU104"
    name = "device-comparison"
    summary = "Comparisons of devices with `\"cuda\"` (`x.device.type == \"cuda\"`) compare with `\"npu\"`"

    def leave_Comparison(self, original_node: cst.Comparison,
                         updated_node: cst.Comparison) -> cst.BaseExpression:
        if len(updated_node.comparisons) != 1 or len(original_node.comparisons) != 1:
            return updated_node
        target = updated_node.comparisons[0]
        if not isinstance(target.operator, _COMPARE):
            return updated_node
        left, right = updated_node.left, target.comparator
        names = self.table.names
        if is_device_name(original_node.left, names) and self._stringy(right):
            new = self.swap(original_node.comparisons[0].comparator, right, "a device comparison",
                            collection=True)
            if new is not right:
                return updated_node.with_changes(comparisons=[target.with_changes(comparator=new)])
        elif is_device_name(original_node.comparisons[0].comparator, names) and self._stringy(left):
            new = self.swap(original_node.left, left, "a device comparison", collection=True)
            if new is not left:
                return updated_node.with_changes(left=new)
        return updated_node

    @staticmethod
    def _stringy(node: cst.BaseExpression) -> bool:
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return any(isinstance(e, cst.Element) and mentions_cuda(e.value) for e in node.elements)
        return mentions_cuda(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        """`str(x.device).startswith("cuda")`."""
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "startswith"
                and len(updated_node.args) == 1 and updated_node.args[0].keyword is None
                and mentions_cuda(updated_node.args[0].value)):
            return updated_node
        original_func = original_node.func
        assert isinstance(original_func, cst.Attribute)
        if not is_device_name(original_func.value, self.table.names):
            return updated_node
        arg = updated_node.args[0]
        new = self.swap(original_node.args[0].value, arg.value, "a device prefix test", collection=True)
        return updated_node.with_changes(args=[arg.with_changes(value=new)]) if new is not arg.value \
            else updated_node


class ArgparseDevice(_DeviceRule):
    code = "NPU105"
    name = "argparse-device-option"
    summary = "`default=` and `choices=` of an argparse `--device` option name NPU devices"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            return updated_node
        if not self._names_device(original_node) or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        changed = False
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.keyword is None or arg.keyword.value not in ("default", "choices", "const"):
                continue
            if not self._stringy(arg.value):
                continue
            new = self.swap(orig.value, arg.value, f"`{arg.keyword.value}=` of a device option",
                            collection=arg.keyword.value == "choices")
            if new is not arg.value:
                args[i] = arg.with_changes(value=new)
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    _stringy = staticmethod(DeviceComparison._stringy)

    @staticmethod
    def _names_device(call: cst.Call) -> bool:
        """An option whose flag (or dest) is about devices: `--device`, `--device-type`, ..."""
        for arg in call.args:
            value = arg.value
            if (arg.keyword is None or arg.keyword.value == "dest") and isinstance(value, cst.SimpleString):
                flag = value.raw_value.lstrip("-").replace("-", "_").lower()
                if flag == "device" or flag.startswith("device_") or flag.endswith("_device"):
                    return True
        return False



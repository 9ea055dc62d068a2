"""Device strings and device positions, shared by every rule that rewrites a device.

The device-position table (`codemods/data/device_positions*.json`, merged) says which
arguments, keywords, methods and variable names hold a device; `device_expr` gives the NPU form
of a device-valued expression (`"cuda"`, `"cuda:N"`, f-strings, `%` and `.format` templates).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import libcst as cst

from codemods.data.tables import DATA, read_table

_PLAIN = re.compile(r"cuda(:\d+)?")
_PERCENT = re.compile(r"cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis])")
_FORMAT = re.compile(r"cuda:\{[^{}]*\}")


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
        data = read_table(path)
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


def collection_mentions_cuda(node: cst.BaseExpression) -> bool:
    """`mentions_cuda` for a device string or any element of a tuple/list/set of them."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(isinstance(e, cst.Element) and mentions_cuda(e.value) for e in node.elements)
    return mentions_cuda(node)


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



"""Kernel selectors: `"cuda"` used as the name of an implementation, not of a device.

StyleGAN's ops take `impl='cuda'` and test `if impl == 'cuda' and x.device.type == 'cuda' and
_init():` in front of a JIT-built CUDA plugin, with `assert impl in ['ref', 'cuda']`: there
`'cuda'` picks the CUDA implementation over the reference one. Written as `"npu"` it would name
an implementation that does not exist; the device test next to it is what decides, on the NPU,
that the reference implementation runs. A name is a selector in a file when the string values it is
compared with, defaults to, is passed as or is assigned include `"cuda"` and a word that names
no device (`'ref'`, `'triton'`, `'naive'`), or when it is called like one (`impl`); a name the
device table calls a device (`device`, `dev`, ...) never is, nor `type` (`x.device.type`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codemods.analyses.devices import device_positions

# words that name a device or a device family (a value set of only these is about devices)
_DEVICE_WORD = re.compile(r"(?:cuda|cpu|mps|xpu|npu|meta|hpu|xla|gpu|tpu|auto|mlu|musa|ipu|hip|rocm|dml|directml"
                          r"|privateuseone|vulkan|neuron|habana|accelerator|none)(?::\d+)?", re.IGNORECASE)
# names that select an implementation wherever they are written
SELECTOR_NAMES = frozenset({"impl", "implementation", "kernel_impl", "impl_type", "attn_impl", "op_impl"})
# keywords whose values belong to the option a call defines, not to a name of their own
_OPTION_KEYWORDS = frozenset({"default", "choices", "const"})


@dataclass
class KernelSelectors:
    """The file's selector names with their values, and where they take `"cuda"`."""

    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    literals: set[int] = field(default_factory=set)  # id() of the `"cuda"` constants they take
    lines: dict[int, str] = field(default_factory=dict)  # line of such a constant -> the name

    def describe(self, name: str) -> str:
        values = ", ".join(repr(v) for v in self.names[name])
        return f"`{name}` selects an implementation (its values here: {values}), not a device"


def _spelled(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _strings(node: ast.AST | None) -> Iterator[tuple[ast.Constant, str]]:
    """The string constants a value is or holds (`'cuda'`, `['ref', 'cuda']`), with their text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node, node.value
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            yield from _strings(element)


_PAIRED = (ast.Compare, ast.FunctionDef, ast.AsyncFunctionDef, ast.Call, ast.Assign, ast.AnnAssign)


def _pairs(model: Any) -> Iterator[tuple[str, ast.AST | None]]:
    """(name, value) for every place a name meets a string value (the model's shared walk)."""
    for node in model.of_type(*_PAIRED):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for named in operands:
                name = _spelled(named)
                if name is not None:
                    yield from ((name, other) for other in operands if other is not named)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            yield from ((a.arg, d) for a, d in zip(positional[len(positional) - len(arguments.defaults):],
                                                    arguments.defaults, strict=True))
            yield from ((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True))
        elif isinstance(node, ast.Call):
            yield from _keyword_pairs(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = _spelled(target)
                if name is not None:
                    yield name, node.value


def _option_name(call: ast.Call) -> str | None:
    """The name an `add_argument("--impl", ...)` option is read back by (`args.impl`)."""
    dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
    if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
        return dest.value
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longest = max(flags, key=lambda flag: (flag.startswith("--"), len(flag)), default=None)
    return longest.lstrip("-").replace("-", "_") if longest else None


def _keyword_pairs(call: ast.Call) -> Iterator[tuple[str, ast.AST | None]]:
    """A call's keywords as names. `default=` and `choices=` name no value of their own: an
    option's values belong to the option (`--impl`), so that the defaults of every option of a
    parser are not taken for the values of one name (`default`)."""
    option = _option_name(call) if _spelled(call.func) == "add_argument" else None
    for keyword in call.keywords:
        if keyword.arg in _OPTION_KEYWORDS:
            if option is not None:
                yield option, keyword.value
        elif keyword.arg:
            yield keyword.arg, keyword.value


def kernel_selectors(model: Any) -> KernelSelectors:
    """The file's kernel selectors (read through `model.derived(kernel_selectors)`)."""
    values: dict[str, set[str]] = {}
    places: dict[str, list[ast.Constant]] = {}
    for name, value in _pairs(model):
        for constant, text in _strings(value):
            values.setdefault(name, set()).add(text)
            places.setdefault(name, []).append(constant)
    devices = device_positions().names
    found = KernelSelectors()
    for name, seen in values.items():
        lowered = name.lower()
        if "cuda" not in seen or lowered in devices or "dev" in lowered or lowered == "type":
            continue
        if lowered in SELECTOR_NAMES or any(not _DEVICE_WORD.fullmatch(v) for v in seen):
            found.names[name] = tuple(sorted(seen))
            for constant in places[name]:
                if constant.value == "cuda":
                    found.literals.add(id(constant))
                    found.lines.setdefault(constant.lineno, name)
    return found

"""The device value of portable code (`--target portable`, docs/targets.md).

Portable rewrites name one device per file, defined once after the imports:

    DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")

It is the CUDA GPU on a CUDA machine, the NPU on an Ascend machine (torch_npu registers itself
through autoload) and the CPU elsewhere, so a script that ran on CPU before still runs there.
`.cuda()` becomes `.to(DEVICE)`, an AMP device `DEVICE.type`, the `nccl` backend
`dist.get_default_backend_for_device(DEVICE)`. A rule asks for the definition with
`require_device(context)`; the engine writes it with `define_device` after the imports.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

import libcst as cst

from codemods.framework.imports import newline_of, split_lines
from codemods.framework.targets import version_allows

# torch < 2.5 does not load torch_npu by itself (no autoload): import it where it is installed
GUARDED_IMPORT = "try:\n    import torch_npu  # noqa: F401  (torch < 2.5: no autoload)\nexcept ImportError:\n    pass"
DEVICE = "DEVICE"
DEFINITION = f'{DEVICE} = torch.accelerator.current_accelerator() or torch.device("cpu")'
ACCELERATOR = "torch.accelerator"


def portable_ok(options: Mapping[str, Any]) -> bool:
    """Whether the configured minimum torch has `torch.accelerator` (else rules report)."""
    return version_allows(options, ACCELERATOR)


def require_device(context: Any) -> cst.Name | None:
    """The device value, defined once per file by the engine (it needs `import torch`); None
    when the file binds `DEVICE` to something else itself (the rule reports then)."""
    if binds_device(context.source):
        return None
    context.definitions.add(DEFINITION)
    context.require_import("torch")
    return cst.Name(DEVICE)


def device_type(context: Any) -> cst.Attribute | None:
    device = require_device(context)
    return None if device is None else cst.Attribute(value=device, attr=cst.Name("type"))


def binds_device(source: str) -> bool:
    """Whether the file binds `DEVICE` to anything but the portable definition."""
    return any(line.strip() != DEFINITION for line in re.findall(rf"^[ \t]*{DEVICE}\s*=(?!=).*$", source, re.M))


def _definition_order(definition: str) -> int:
    return 0 if definition == GUARDED_IMPORT else 1  # torch_npu registers the device first


def guard_import(context: Any) -> None:
    """Portable code for a torch older than autoload imports torch_npu itself, optionally."""
    if context.edits and not version_allows(context.options, "autoload"):
        context.definitions.add(GUARDED_IMPORT)


def define_device(text: str, definitions: set[str]) -> tuple[str, int]:
    """`text` with each definition inserted after the last top-level import (once: a definition
    already there is kept); the 1-based line of the first one added, 0 for none. Each
    definition is one or more whole lines."""
    lines = split_lines(text)
    try:
        tree = ast.parse(text)
    except SyntaxError:  # newer syntax than this Python reads: the rules' edits are reported
        return text, 0
    missing = [d for d in sorted(definitions, key=_definition_order) if d not in text]
    if not missing:
        return text, 0
    at = max((node.end_lineno or node.lineno for node in tree.body
              if isinstance(node, (ast.Import, ast.ImportFrom))), default=0)
    newline = newline_of(text)
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    lines[at:at] = [d.replace("\n", newline) + newline for d in missing]
    return "".join(lines), at + 1


# `torch.cuda.<name>` -> its device-generic spelling: (replacement, API of the version table)
_ACCELERATOR = {"is_available": "is_available", "device_count": "device_count",
                "synchronize": "synchronize", "current_device": "current_device_index",
                "set_device": "set_device_index", "current_stream": "current_stream",
                "set_stream": "set_stream"}
_MEMORY = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "empty_cache", "memory_stats", "reset_peak_memory_stats", "reset_accumulated_memory_stats")
# torch.manual_seed seeds the CPU and every device's generator
_SEEDS = ("manual_seed", "manual_seed_all")


def generic_name(name: str, options: Mapping[str, Any]) -> str | None:
    """The device-generic spelling of `torch.cuda.<name>` (None: none, or too new for the
    configured minimum torch): torch.accelerator where it has the name, else
    `torch.get_device_module().<name>`."""
    if name in _SEEDS:
        return "torch.manual_seed"
    if name in _ACCELERATOR and version_allows(options, ACCELERATOR):
        return f"torch.accelerator.{_ACCELERATOR[name]}"
    if name in _MEMORY and version_allows(options, "torch.accelerator.memory"):
        return f"torch.accelerator.{name}"
    if version_allows(options, "torch.get_device_module"):
        return f"torch.get_device_module().{name}"
    return None


def _is_cuda_string(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda"


def generic_device_value(context: Any, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """A proven device value that says `"cuda"`, made generic: the string `"cuda"` becomes
    `DEVICE.type`, also as a branch of `... if <available> else "cpu"`; None for anything else
    (`"cuda:1"`, templates), which the rule reports."""
    if not portable_ok(context.options):
        return None
    if _is_cuda_string(node):
        return device_type(context)
    if isinstance(node, cst.IfExp) and (_is_cuda_string(node.body) or _is_cuda_string(node.orelse)):
        other = node.orelse if _is_cuda_string(node.body) else node.body
        if isinstance(other, cst.SimpleString):
            value = device_type(context)
            if value is None:
                return None
            if _is_cuda_string(node.body):
                return node.with_changes(body=value)
            return node.with_changes(orelse=value)
    return None

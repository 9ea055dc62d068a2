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
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

import libcst as cst

from codemods.api.targets import version_allows
from codemods.model.imports import newline_of, split_lines
from npu_migrate.core.diagnostics import Severity

# torch < 2.5 does not load torch_npu by itself (no autoload): import it where it is installed
GUARDED_IMPORT = "try:\n    import torch_npu  # noqa: F401  (torch < 2.5: no autoload)\nexcept ImportError:\n    pass"
DEVICE = "DEVICE"
# the name used instead where the file binds `DEVICE` itself (a user's `DEVICE = "cuda"`)
SPARE = "PORTABLE_DEVICE"


def definition(name: str = DEVICE) -> str:
    return f'{name} = torch.accelerator.current_accelerator() or torch.device("cpu")'


DEFINITION = definition()
ACCELERATOR = "torch.accelerator"


def portable_ok(options: Mapping[str, Any]) -> bool:
    """Whether the configured minimum torch has `torch.accelerator` (else rules report)."""
    return version_allows(options, ACCELERATOR)


def device_name(source: str) -> str | None:
    """The name of the portable device value in this file: `DEVICE`, or `PORTABLE_DEVICE` where
    the file binds `DEVICE` to something else; None when both are taken."""
    for name in (DEVICE, SPARE):
        if not binds_device(source, name):
            return name
    return None


def require_device(context: Any) -> cst.Name | None:
    """The device value, defined once per file by the engine (it needs `import torch`); None
    when the file binds both names to something else itself (the rule reports then)."""
    name = device_name(context.source)
    if name is None:
        return None
    context.definitions.add(definition(name))
    context.require_import("torch")
    return cst.Name(name)


def device_type(context: Any) -> cst.Attribute | None:
    device = require_device(context)
    return None if device is None else cst.Attribute(value=device, attr=cst.Name("type"))


def binds_device(source: str, name: str = DEVICE) -> bool:
    """Whether the file binds `name` to anything but the portable definition."""
    return any(line.strip() != definition(name)
               for line in re.findall(rf"^[ \t]*{name}\s*=(?!=).*$", source, re.M))


def _definition_order(definition: str) -> int:
    return 0 if definition == GUARDED_IMPORT else 1  # torch_npu registers the device first; then by text (a set has no order)


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
    missing = [d for d in sorted(definitions, key=lambda d: (_definition_order(d), d)) if d not in text]
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


_INDEXED = re.compile(r"cuda:(\d+)")
_PERCENT = re.compile(r"cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis])")
_FORMAT = re.compile(r"cuda:(\{[^{}]*\})")


def _typed(device_type: cst.BaseExpression, rest: str, quote: str) -> cst.FormattedString:
    """f"{DEVICE.type}<rest>": a device string of the run's device type (`rest` is ":1")."""
    parts: list[cst.BaseFormattedStringContent] = [cst.FormattedStringExpression(device_type)]
    if rest:
        parts.append(cst.FormattedStringText(rest.replace("{", "{{").replace("}", "}}")))
    end = cast(Literal['"', "'", '"""', "'''"], quote)
    return cst.FormattedString(parts=parts, start=f"f{quote}", end=end)


def _plain(node: cst.SimpleString) -> str | None:
    return None if "b" in node.prefix.lower() or "r" in node.prefix.lower() else node.raw_value


def _portable_expr(node: cst.BaseExpression, kind: cst.BaseExpression) -> cst.BaseExpression | None:
    """`device_expr` of codemods/analyses/devices.py for the portable target, with `kind` the
    device type expression (`DEVICE.type`): the type is the run's, an index is kept."""
    if isinstance(node, cst.SimpleString):
        raw = _plain(node)
        if raw == "cuda":
            return kind
        match = _INDEXED.fullmatch(raw or "")
        return _typed(kind, raw[4:], node.quote) if match and raw else None
    if isinstance(node, cst.FormattedString):
        first, rest = (node.parts[0], node.parts[1:]) if node.parts else (None, [])
        if "b" in node.prefix.lower() or not isinstance(first, cst.FormattedStringText):
            return None
        if first.value == "cuda" and not rest:
            return kind
        if first.value.startswith("cuda:") and (rest or _INDEXED.fullmatch(first.value)):
            tail = [first.with_changes(value=first.value[4:]), *rest]
            return node.with_changes(parts=[cst.FormattedStringExpression(kind), *tail])
        return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.left, cst.SimpleString):
        raw = _plain(node.left)
        if raw is None:
            return None
        if isinstance(node.operator, cst.Modulo) and _PERCENT.fullmatch(raw):
            return node.with_changes(left=_typed(kind, raw[4:], node.left.quote))
        if isinstance(node.operator, cst.Add) and raw == "cuda:":
            return node.with_changes(left=_typed(kind, ":", node.left.quote))
        return None
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format"
            and isinstance(node.func.value, cst.SimpleString)):
        raw = _plain(node.func.value)
        if raw is None or not _FORMAT.fullmatch(raw):
            return None  # `(DEVICE.type + ":{}").format(i)`: the template keeps its fields
        template = cst.BinaryOperation(kind, cst.Add(), node.func.value.with_changes(value=f"{node.func.value.quote}"
                                       f"{raw[4:]}{node.func.value.quote}"),
                                       lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return node.with_changes(func=node.func.with_changes(value=template))
    if isinstance(node, cst.IfExp):
        body, orelse = _portable_expr(node.body, kind), _portable_expr(node.orelse, kind)
        if body is None and orelse is None:
            return None
        return node.with_changes(body=body or node.body, orelse=orelse or node.orelse)
    return None


def generic_device_value(context: Any, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """A proven device value that names CUDA, made generic: `"cuda"` becomes `DEVICE.type`,
    `"cuda:1"` `f"{DEVICE.type}:1"`, `f"cuda:{i}"` `f"{DEVICE.type}:{i}"` (and the `%`,
    `+` and `.format` templates alike), also as branches of `... if <available> else "cpu"`.
    A string stays a string, so `"cuda" in device` and `torch.device(device)` keep working; on
    CPU `"cpu:1"` is the CPU. None for anything else (the rule reports)."""
    if not portable_ok(context.options):
        return None
    if _portable_expr(node, cst.Name(SPARE)) is None:
        return None
    kind = device_type(context)
    return None if kind is None else _portable_expr(node, kind)


_INDEX_NAME = re.compile(r"(?i)(local_?)?rank|gpus?|gpu_?(id|idx|index)|device_?(id|idx|index)|dev_?(id|idx)|idx|index|i")


def is_device_index(node: cst.BaseExpression) -> bool:
    """Whether an argument of `.cuda(...)` is an index (not a device or a string): an int
    literal, `int(...)`, `x.get_device()`, or a name that says so (`rank`, `local_rank`,
    `args.gpu`, `LOCAL_RANK`, `device_id`)."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        return (isinstance(func, cst.Name) and func.value == "int") or (
            isinstance(func, cst.Attribute) and func.attr.value in ("get_device", "current_device_index"))
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else None
    return name is not None and _INDEX_NAME.fullmatch(name) is not None


def indexed_device(context: Any, index: cst.BaseExpression) -> cst.Call | None:
    """`torch.device(DEVICE.type, index)`: device `index` of the run's accelerator (on CPU,
    `cpu:index`, which tensors and modules treat as the CPU)."""
    kind = device_type(context)
    if kind is None:
        return None
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(func=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("device")),
                    args=[cst.Arg(kind, comma=comma), cst.Arg(index)])


def generic_device_collection(context: Any, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`generic_device_value` for a device value or a tuple/list/set of them (argparse
    `choices=["cuda", "cpu"]` -> `[DEVICE.type, "cpu"]`: the same set on a CUDA machine)."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return generic_device_value(context, node)
    elements, changed = [], False
    for element in node.elements:
        new = generic_device_value(context, element.value) if isinstance(element, cst.Element) else None
        changed |= new is not None
        elements.append(element.with_changes(value=new) if new is not None else element)
    return node.with_changes(elements=elements) if changed else None


# -- launch environments: both clusters' visible-device variables ---------------------------------
CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
ASCEND_VISIBLE = "ASCEND_RT_VISIBLE_DEVICES"
TWIN_MESSAGE = (f"`{ASCEND_VISIBLE}` set beside `{CUDA_VISIBLE}` (each runtime reads its own, the other "
                "ignores it: the launch serves CUDA and Ascend hosts)")


def shell_visible_twins(text: str) -> list[Any]:
    """`envmap.Change`s that set `ASCEND_RT_VISIBLE_DEVICES` beside each assignment or unset of
    `CUDA_VISIBLE_DEVICES` in shell `text`, keeping the CUDA one (see `shell_env_twins`); a
    literal list that torch_npu cannot read is reported as for the npu target."""
    return shell_env_twins(text, lambda name: ASCEND_VISIBLE if name == CUDA_VISIBLE else None,
                           check_lists=True)


def shell_rename_twins(text: str) -> list[Any]:
    """The same for the plainly renamed variables (NPU252: `TORCH_NCCL_BLOCKING_WAIT` ->
    `TORCH_HCCL_BLOCKING_WAIT`, `CUDA_LAUNCH_BLOCKING` -> `ASCEND_LAUNCH_BLOCKING`, ...)."""
    from codemods.analyses import envmap

    def twin(name: str) -> str | None:
        entry = envmap.lookup(name)
        return entry.npu if entry is not None and entry.kind == "rename" and entry.npu and \
            not entry.cuda.endswith("*") else None
    return shell_env_twins(text, twin, check_lists=False)


def shell_env_twins(text: str, twin_of: Callable[[str], str | None], check_lists: bool) -> list[Any]:
    """`envmap.Change`s that set each variable's Ascend twin beside its assignments and unsets,
    keeping the CUDA one: `X=0,1 cmd` -> `TWIN=0,1 X=0,1 cmd`, `export X=..` -> `export TWIN=..
    X=..`, `docker -e X=0` -> `-e TWIN=0 -e X=0`, `unset X` -> `unset TWIN X`. A command that
    already names the twin is left alone (a second run changes nothing)."""
    from codemods.analyses import envmap
    from codemods.model.shellwords import lex

    changes: list[Any] = []
    for words in lex(text):
        literals = [w.literal(text) for w in words]
        head = next((lit for lit in literals if not (lit and re.match(r"\w+=", lit))), None)
        env_file = envmap.writes_env_file(literals)
        if head in ("echo", "printf") and not env_file:
            continue
        for i, word in enumerate(words):
            raw = text[word.start:word.end]
            literal = literals[i]
            found = re.match(r"""["']?([A-Za-z_]\w*)=""", raw)
            name: str | None = found.group(1) if found else (literal if head == "unset" else None)
            twin = twin_of(name) if name else None
            if name is None or twin is None or any(twin in text[w.start:w.end] for w in words):
                continue
            message = (f"`{twin}` set beside `{name}` (each runtime reads its own, the other ignores it: "
                       "the launch serves CUDA and Ascend hosts)")
            if env_file:  # one `NAME=value` per line: the twin needs a line of its own
                changes.append(envmap.Change("twin", word.start, severity=Severity.WARNING, message=(
                    f"`{name}` is written to a launcher's env file: write `{twin}` on a line of its own "
                    "beside it (each runtime reads its own, the other ignores it)")))
                continue
            if found is None:  # `unset X`
                changes.append(envmap.Change("twin", word.start, word.start, f"{twin} ", message))
                continue
            option = literals[i - 1] if i and literals[i - 1] in ("-x", "-e", "--env") else None
            at = words[i - 1].start if option else word.start
            prefix = f"{option} " if option else ""
            changes.append(envmap.Change("twin", at, at, f"{prefix}{raw.replace(name, twin, 1)} ", message))
            value = literal.split("=", 1)[1] if literal else None
            for problem in envmap.check_device_list(twin, value) if check_lists and value is not None else ():
                changes.append(envmap.Change("twin", word.start, severity=problem.severity, message=problem.message))
    return changes

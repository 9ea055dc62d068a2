"""The entry-point protocol (docs/verify.md): `FILE.py:FUNCTION` names a function that builds the
model and a batch. It may take one argument, the device string of its side ("cpu", "cuda" or
"npu"), and returns a dict or an object with:

- `model` (torch.nn.Module, required)
- `batch` (required): a tensor (called as `model(batch)`), a tuple/list (`model(*batch)`) or a
  dict (`model(**batch)`)
- `target` (optional): passed to `loss_fn`
- `loss_fn` (optional): `loss_fn(output, target)`, or `loss_fn(output)` without a target; default:
  `output.loss` when present, else the sum of the means of the floating outputs
- `optimizer` (optional): over `model.parameters()`; default SGD(lr=0.01)
- `forward` (optional): `forward(model, batch) -> output`, replacing the call convention above
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


class EntryError(Exception):
    """The entry point is missing or does not follow the protocol; `file` names the entry file."""

    def __init__(self, message: str, file: str | None = None) -> None:
        super().__init__(message)
        self.file = file


@dataclass
class BuildSpec:
    model: torch.nn.Module
    batch: Any
    target: Any = None
    loss_fn: Callable | None = None
    optimizer: torch.optim.Optimizer | None = None
    forward: Callable | None = None


def split_entry(entry: str) -> tuple[str, str]:
    path, sep, func = entry.rpartition(":")
    if not sep or not path or not func or not path.endswith(".py"):
        raise EntryError(f"--entry {entry!r}: expected FILE.py:FUNCTION, e.g. train.py:build")
    return path, func


def load_build(root: Path, entry: str) -> Callable[..., Any]:
    rel_path, func_name = split_entry(entry)
    path = root / rel_path
    if not path.is_file():
        raise EntryError(f"{path}: entry file not found")
    name = Path(rel_path).with_suffix("").as_posix().replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # a path not ending in .py
        raise EntryError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    build = getattr(module, func_name, None)
    if not callable(build):
        raise EntryError(f"no function {func_name!r}", rel_path)
    build.entry_file = rel_path
    return build


def call_build(build: Callable[..., Any], device: str) -> BuildSpec:
    try:
        takes_device = len(inspect.signature(build).parameters) >= 1
    except (TypeError, ValueError):
        takes_device = False
    result = build(device) if takes_device else build()
    get = result.get if isinstance(result, dict) else (lambda key, default=None: getattr(result, key, default))
    model, batch = get("model"), get("batch")
    file = getattr(build, "entry_file", None)
    if not isinstance(model, torch.nn.Module):
        raise EntryError(f"{build.__name__}() must return 'model' as a torch.nn.Module, got {type(model).__name__}", file)
    if batch is None:
        raise EntryError(f"{build.__name__}() must return a 'batch'", file)
    optimizer = get("optimizer")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise EntryError(f"{build.__name__}(): 'optimizer' must be a torch.optim.Optimizer", file)
    return BuildSpec(model, batch, get("target"), get("loss_fn"), optimizer, get("forward"))


def run_forward(spec: BuildSpec) -> Any:
    if spec.forward is not None:
        return spec.forward(spec.model, spec.batch)
    if isinstance(spec.batch, dict):
        return spec.model(**spec.batch)
    if isinstance(spec.batch, (tuple, list)):
        return spec.model(*spec.batch)
    return spec.model(spec.batch)


def compute_loss(spec: BuildSpec, output: Any) -> torch.Tensor:
    if spec.loss_fn is not None:
        return spec.loss_fn(output, spec.target) if spec.target is not None else spec.loss_fn(output)
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    leaves = [t for _, t in flatten("output", output) if t.is_floating_point()]
    if not leaves:
        raise EntryError("the model output has no floating tensor; give build() a loss_fn")
    total = leaves[0].float().mean()
    for tensor in leaves[1:]:
        total = total + tensor.float().mean()
    return total


def flatten(prefix: str, value: Any) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) leaves of nested tensors, tuples, lists, dicts and dataclasses."""
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (tuple, list)):
        items = enumerate(value)
    elif hasattr(value, "__dataclass_fields__"):
        items = ((k, getattr(value, k)) for k in value.__dataclass_fields__)
    else:
        return []
    out: list[tuple[str, torch.Tensor]] = []
    for key, item in items:
        out += flatten(f"{prefix}.{key}", item)
    return out


def map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return type(value)((k, map_tensors(v, fn)) for k, v in value.items())
    if isinstance(value, tuple):
        return tuple(map_tensors(v, fn) for v in value)
    if isinstance(value, list):
        return [map_tensors(v, fn) for v in value]
    return value

"""Forward hooks that record each module call's inputs and outputs, in execution order, so that
the comparison can find the first module where the two sides part."""

from __future__ import annotations

import inspect
import os
from collections import OrderedDict
from typing import Any

import torch

from .entry import flatten


def to_cpu_copy(tensor: torch.Tensor) -> torch.Tensor:
    copy = tensor.detach().to("cpu")
    # on CPU .to() returns the same storage; later in-place ops must not change the record
    return copy.clone() if copy.data_ptr() == tensor.data_ptr() else copy


def module_locations(model: torch.nn.Module, root: str) -> dict[str, dict[str, Any]]:
    """name -> class name and file:line of the module's class (relative to `root` when inside)."""
    out = {}
    for name, module in model.named_modules():
        cls = type(module)
        try:
            path = inspect.getsourcefile(cls) or "?"
            line = inspect.getsourcelines(cls)[1]
        except (TypeError, OSError):
            path, line = "?", 0
        if path != "?" and os.path.abspath(path).startswith(os.path.abspath(root) + os.sep):
            path = os.path.relpath(path, root)
        out[name or "<model>"] = {"class": cls.__qualname__, "file": path, "line": line}
    return out


class Recorder:
    """Registers pre/post forward hooks on every module; keeps tensors and the event order."""

    def __init__(self, model: torch.nn.Module, tensors: OrderedDict[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.events: list[dict[str, Any]] = []
        self.stack: list[str] = []
        self.calls: dict[str, int] = {}
        self.recording = True
        self.handles = []
        for name, module in model.named_modules():
            label = name or "<model>"
            self.handles.append(module.register_forward_pre_hook(self._pre(label), with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._post(label)))

    def _pre(self, label: str):
        def hook(module, args, kwargs):
            self.stack.append(label)
            if self.recording:
                call = self.calls.get(label, 0)
                self.calls[label] = call + 1
                self._record(label, call, "in", (args, kwargs))
        return hook

    def _post(self, label: str):
        def hook(module, args, output):
            if self.stack and self.stack[-1] == label:
                self.stack.pop()
            if self.recording:
                self._record(label, self.calls[label] - 1, "out", output)
        return hook

    def _record(self, label: str, call: int, kind: str, value: Any) -> None:
        key = f"act/{label}#{call}/{kind}"
        names = []
        for name, tensor in flatten(key, value):
            self.tensors[name] = to_cpu_copy(tensor)
            names.append(name)
        self.events.append({"module": label, "call": call, "kind": kind, "tensors": names})

    def stop_recording(self) -> None:
        self.recording = False

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

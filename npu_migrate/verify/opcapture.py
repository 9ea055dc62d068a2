"""Per-op capture of a real run, msprobe style, for script mode.

`OpCapture` is a TorchDispatchMode: every aten op that produces data (views are skipped: they hold
no new numbers) is summarised (shape, dtype, Max/Min/Mean/Norm and an evenly spaced sample of up to
SAMPLE elements) with its call-site: the innermost stack frame inside the user's tree. Alongside the
ops it records, in one sequence, the seeds the code sets, the loss of every `backward()` call (one
training step each) and the numbers the script prints, so the comparison can report whichever
diverges first, at the user's `path.py:LINE`.

The run stops at the (steps+1)-th `backward()`: `StopRun` derives from BaseException so that a
script's `except Exception` does not swallow it.
"""

from __future__ import annotations

import io
import os
import random
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from npu_migrate.emulation import INTERNAL_OPS as AUDIT_INTERNAL

SAMPLE = 256
# detach makes no new numbers, but a missing one (a hidden state no longer detached) changes what
# backward() does: it is recorded so that the comparison can point at the line that stopped running it
_DETACH = "aten.detach.default"
_SKIP_OPS = {"aten.lift_fresh.default", "aten.alias.default",
             "aten._local_scalar_dense.default", "aten.set_.source_Storage",
             "aten.set_.source_Storage_storage_offset", "aten.record_stream.default"}

OWN_OPS = __import__("types").SimpleNamespace(depth=0)  # > 0 while the recorder computes summaries
# outputs that are scratch space of a kernel (an RNN's workspace), uninitialised: nothing to compare
_WORKSPACE = {"aten.mkldnn_rnn_layer.default": 3, "aten._thnn_fused_lstm_cell.default": 2,
              "aten._thnn_fused_gru_cell.default": 1, "aten._cudnn_rnn.default": 3}
# ops whose output holds whatever was in memory: nothing to compare
_UNINITIALISED = ("aten.empty", "aten.new_empty", "aten.empty_like", "aten.empty_strided")


class StopRun(BaseException):
    """Raised at the (steps+1)-th backward(): the requested steps are done."""


def summarise(tensor: torch.Tensor) -> dict[str, Any]:
    """msprobe's statistics plus an evenly spaced sample (float32, on the CPU); its own ops are
    never recorded (inside __torch_dispatch__ the mode is off; elsewhere it is paused here)."""
    OWN_OPS.depth += 1
    try:
        return _summarise(tensor)
    finally:
        OWN_OPS.depth -= 1


def _summarise(tensor: torch.Tensor) -> dict[str, Any]:
    data = tensor.detach()
    summary: dict[str, Any] = {"shape": list(data.shape), "dtype": str(data.dtype).removeprefix("torch.")}
    if data.is_complex():
        data = torch.view_as_real(data)
    if data.layout != torch.strided:  # sparse outputs (a graph's adjacency matrix) are compared dense
        data = data.to_dense()
    if data.numel() == 0 or data.device.type == "meta":
        summary.update(Max=None, Min=None, Mean=None, Norm=None, sample=None)
        return summary
    flat = data.reshape(-1).to(torch.float32)
    finite = torch.isfinite(flat)
    values = flat[finite] if not bool(finite.all()) else flat
    if values.numel():
        summary.update(Max=float(values.max()), Min=float(values.min()), Mean=float(values.mean()),
                       Norm=float(values.norm()))
    else:
        summary.update(Max=None, Min=None, Mean=None, Norm=None)
    summary["nonfinite"] = int((~finite).sum())
    step = max(1, flat.numel() // SAMPLE)
    summary["sample"] = flat[::step][:SAMPLE].clone().cpu()
    return summary


class Sites:
    """Turns the current Python stack into the user's call-site, relative to the tree root."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root) + os.sep

    def here(self, building: Any = None) -> str | None:
        """The innermost frame in the tree; with `building`, skip that object's own __init__ frames
        (a module is built where its constructor is called, not at its super().__init__())."""
        frame = sys._getframe(1)
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.root) and not (
                    building is not None and frame.f_code.co_name == "__init__"
                    and frame.f_locals.get("self") is building):
                line = f"{path[len(self.root):]}:{frame.f_lineno}"
                return line + _call_end(frame) if building is not None else line
            frame = frame.f_back
        return None

    def here_in_function(self) -> tuple[str | None, str | None]:
        """The innermost frame in the tree and the name of the function it runs."""
        frame = sys._getframe(1)
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.root):
                return f"{path[len(self.root):]}:{frame.f_lineno}", frame.f_code.co_name
            frame = frame.f_back
        return None, None

    def chain(self) -> list[str]:
        """Every frame in the tree, innermost first (the helper's line, then its callers')."""
        lines, frame = [], sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.startswith(self.root):
                lines.append(f"{frame.f_code.co_filename[len(self.root):]}:{frame.f_lineno}")
            frame = frame.f_back
        return lines


def _call_end(frame: Any) -> str:
    """"-END" when the call running in `frame` spans several lines (a constructor whose arguments
    continue on the next lines), else ""."""
    try:
        positions = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (IndexError, ValueError):
        return ""
    start, end = positions[0], positions[1]
    return f"-{end}" if start is not None and end is not None and end > start else ""


class Record:
    """What one side recorded, in program order (each event has a global sequence number)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.step = -1  # -1: before the first backward (model construction, data, first forward)
        self.phase = "forward"
        self.op_counts: dict[str, int] = {}
        self.max_ops = 200_000
        self.truncated = False

    def add(self, event: dict[str, Any]) -> None:
        if len(self.events) >= self.max_ops:
            self.truncated = True
            return
        event["seq"] = len(self.events)
        event["step"] = self.step
        self.events.append(event)


class OpCapture(TorchDispatchMode):
    """`memory` (a statecapture.LiveBytes), when given, is told every storage an op produces."""

    def __init__(self, record: Record, sites: Sites, modules: ModuleTracker, memory: Any = None) -> None:
        super().__init__()
        self.record, self.sites, self.modules, self.memory = record, sites, modules, memory

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if OWN_OPS.depth:
            return out
        name = str(func)
        site = None
        if self.memory is not None and not func.is_view:  # the emulation's own copies (a move) count too
            site = self.sites.here()
            for tensor in _leaves(out):
                if isinstance(tensor, torch.Tensor):
                    self.memory.produced(tensor, site)
        if AUDIT_INTERNAL.depth:
            return out
        if (func.is_view and name != _DETACH) or name in _SKIP_OPS or name.startswith(_UNINITIALISED):
            return out
        produced = [t for i, t in enumerate(_leaves(out))
                    if isinstance(t, torch.Tensor) and i != _WORKSPACE.get(name)]
        if not produced and func._schema.is_mutable and args:  # in-place ops returning nothing
            produced = [t for t in _leaves(args[0]) if isinstance(t, torch.Tensor)]
        produced += _mutated_inputs(func, args, produced)
        if not produced:
            return out
        site, module = site or self.sites.here(), self.modules.current()
        # a foreach op is one op per tensor: the same events a per-tensor loop gives (an optimizer
        # uses foreach on a device and a loop on the CPU)
        groups = [[t] for t in produced] if "_foreach_" in name else [produced]
        name = name.replace("_foreach_", "")
        for group in groups:
            count = self.record.op_counts.get(name, 0)
            self.record.op_counts[name] = count + 1
            event = {"kind": "op", "name": name, "index": count, "phase": self.record.phase,
                     "site": site, "module": module, "outputs": [summarise(t) for t in group]}
            if name == _DETACH:
                event["stack"] = self.sites.chain()
            self.record.add(event)
        return out


# ops that update their running statistics (arguments 3 and 4) in training mode (argument 5) while
# their schema does not mark them as written
_RUNNING_STATS = {"aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
                  "aten.cudnn_batch_norm.default", "aten.miopen_batch_norm.default"}


def _mutated_inputs(func: Any, args: tuple, produced: list[torch.Tensor]) -> list[torch.Tensor]:
    """Tensors an op writes to besides its outputs (batch norm's running mean and variance): state
    no output shows, so a changed momentum is seen at the op that updates it."""
    if str(func) in _RUNNING_STATS:
        return [t for t in args[3:5] if isinstance(t, torch.Tensor)] if len(args) > 5 and args[5] else []
    if not func._schema.is_mutable:
        return []
    found = []
    for argument, value in zip(func._schema.arguments, args):
        info = argument.alias_info
        if info is not None and info.is_write and isinstance(value, torch.Tensor) \
                and not any(value is t for t in produced):
            found.append(value)
    return found


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


class ModuleTracker:
    """Global forward hooks: the module running now (its path in the outermost model, its class)
    and where each module was built (the user's line that constructed it)."""

    def __init__(self, sites: Sites, on_model: Any = None) -> None:
        self.sites, self.on_model = sites, on_model  # on_model(module): a module called at the top level
        self.stack: list[torch.nn.Module] = []
        self.names: dict[int, str] = {}
        self.handles: list[Any] = []

    def install(self) -> None:
        from torch.nn.modules import module as module_mod

        tracker = self
        original_init = torch.nn.Module.__init__

        def init(self, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            if "_npu_migrate_built" not in self.__dict__:  # an attribute: deepcopy'd clones keep it
                object.__setattr__(self, "_npu_migrate_built", tracker.sites.here(building=self))

        torch.nn.Module.__init__ = init
        self.handles.append(module_mod.register_module_forward_pre_hook(self._enter))
        self.handles.append(module_mod.register_module_forward_hook(self._leave))
        self._install_optimizers()

    def _install_optimizers(self) -> None:
        """An optimizer's step counts as its "module": its hyperparameters live where it was built."""
        from torch.optim import optimizer as optimizer_mod

        tracker = self
        original_init = torch.optim.Optimizer.__init__

        def init(self, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            if "_npu_migrate_built" not in self.__dict__:
                self.__dict__["_npu_migrate_built"] = tracker.sites.here(building=self)

        torch.optim.Optimizer.__init__ = init
        self.handles.append(optimizer_mod.register_optimizer_step_pre_hook(
            lambda optimizer, args, kwargs: self.stack.append(optimizer)))
        self.handles.append(optimizer_mod.register_optimizer_step_post_hook(
            lambda optimizer, args, kwargs: self.stack.pop() if self.stack and self.stack[-1] is optimizer else None))

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        if not self.stack and id(module) not in self.names:
            for name, sub in module.named_modules():
                self.names.setdefault(id(sub), name or type(module).__name__)
        if not self.stack and self.on_model is not None:
            self.on_model(module)
        self.stack.append(module)

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.stack and self.stack[-1] is module:
            self.stack.pop()

    def current(self) -> dict[str, Any] | None:
        if not self.stack:
            return None
        module = self.stack[-1]
        path = "optimizer" if isinstance(module, torch.optim.Optimizer) else self.names.get(id(module), "?")
        return {"path": path, "class": type(module).__name__,
                "built": module.__dict__.get("_npu_migrate_built")}


class StepCounter:
    """Patches Tensor.backward / torch.autograd.backward: each call is one training step; its loss
    is recorded; the call after the last requested step raises StopRun."""

    def __init__(self, record: Record, sites: Sites, steps: int) -> None:
        self.record, self.sites, self.steps = record, sites, steps

    def install(self) -> None:
        counter = self
        original_tensor_backward = torch.Tensor.backward
        original_backward = torch.autograd.backward

        def tensor_backward(self, *args: Any, **kwargs: Any) -> None:
            if counter.record.phase == "backward":  # re-entered through a TorchFunctionMode
                return original_tensor_backward(self, *args, **kwargs)
            counter.before(self)
            try:
                original_tensor_backward(self, *args, **kwargs)
            finally:
                counter.record.phase = "forward"

        def autograd_backward(tensors: Any, *args: Any, **kwargs: Any) -> None:
            if counter.record.phase != "backward":  # not already inside Tensor.backward
                first = tensors[0] if isinstance(tensors, (list, tuple)) else tensors
                counter.before(first)
                try:
                    return original_backward(tensors, *args, **kwargs)
                finally:
                    counter.record.phase = "forward"
            return original_backward(tensors, *args, **kwargs)

        torch.Tensor.backward = tensor_backward
        torch.autograd.backward = autograd_backward

    def before(self, loss: torch.Tensor) -> None:
        step = self.record.step + 1
        if step >= self.steps:
            raise StopRun
        self.record.step = step
        self.record.add({"kind": "loss", "name": "loss", "site": self.sites.here(),
                         "outputs": [summarise(loss)]})
        self.record.phase = "backward"


class SeedWatcher:
    """Records the seeds the code sets (torch, torch.cuda / torch.npu, random, numpy)."""

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites
        self.inside = False

    def install(self) -> None:
        targets = [(torch, "manual_seed"), (torch.random, "manual_seed"), (random, "seed")]
        if "numpy" in sys.modules:
            targets.append((sys.modules["numpy"].random, "seed"))
        for owner, attr in targets:
            setattr(owner, attr, self._wrap(getattr(owner, attr), f"{owner.__name__}.{attr}"))

    def _wrap(self, original: Any, label: str) -> Any:
        watcher = self

        def seeded(*args: Any, **kwargs: Any) -> Any:
            if not watcher.inside:
                value = args[0] if args else kwargs.get("seed", kwargs.get("a"))
                watcher.record.add({"kind": "seed", "name": label, "value": repr(value),
                                    "site": watcher.sites.here()})
            watcher.inside = True
            try:
                return original(*args, **kwargs)
            finally:
                watcher.inside = False

        return seeded


class MoveWatcher:
    """Records the user's own device moves (`t.to(device)`, `.cuda()`, `.npu()` called from a line
    of the tree): a tensor the migrated code leaves on the CPU is then traced to the line where the
    original moved it (on a CPU reference a move to the CPU is no op, so no aten op shows it)."""

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites

    def install(self) -> None:
        for name in ("to", "cuda", "npu"):
            original = getattr(torch.Tensor, name, None)
            if original is not None:
                setattr(torch.Tensor, name, self._wrap(original, name))

    def _wrap(self, original: Any, name: str) -> Any:
        watcher, root = self, self.sites.root

        def moved(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(root) and (name != "to" or _names_a_device(args, kwargs)):
                watcher.record.add({"kind": "move", "name": f"Tensor.{name}",
                                    "site": f"{caller.f_code.co_filename[len(root):]}:{caller.f_lineno}",
                                    "shape": list(tensor.shape) if isinstance(tensor, torch.Tensor) else None})
            return original(tensor, *args, **kwargs)

        moved.__name__ = name
        return moved


def _names_a_device(args: tuple, kwargs: dict) -> bool:
    if "device" in kwargs:
        return True
    return bool(args) and (isinstance(args[0], (str, torch.device, int, torch.Tensor)) and not isinstance(args[0], bool))


class PrintTee(io.TextIOBase):
    """stdout that keeps each printed line with the user's line that printed it."""

    def __init__(self, record: Record, sites: Sites, echo: Any) -> None:
        self.record, self.sites, self.echo = record, sites, echo
        self.pending = ""
        self.pending_site: str | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.pending == "":
            self.pending_site = self.sites.here()
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            self.record.add({"kind": "print", "name": "print", "text": line[:500], "site": self.pending_site})
        if self.echo is not None:
            self.echo.write(text)
        return len(text)

    def flush(self) -> None:
        if self.echo is not None:
            self.echo.flush()

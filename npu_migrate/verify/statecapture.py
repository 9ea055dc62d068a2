"""What a script-mode run changes besides op outputs, recorded in program order beside the ops.

- `ModeWatcher`: every `train()` / `eval()` call from the user's code that changes some module's
  mode, with the line that made it;
- `RegionWatcher`: every autocast region entered, with the arguments the user gave (device,
  dtype, enabled) and the line of the `with`;
- `HookWatcher`: hooks the user's code registers (a hook that keeps tensors alive is a memory fault
  whose cause is its registration line);
- `SaveWatcher`: what the script `torch.save`s (tensors summarised, scalars kept);
- `LiveBytes`: the bytes of the storages the ops produced that are still alive, by the user's line
  that produced them, and its peak;
- `final_state`: at the end, every optimizer's hyperparameters and state, every model's modes and
  buffers.

Each only records calls made from a line of the user's tree (`Sites`), so torch's own calls to the
same functions are not counted.
"""

from __future__ import annotations

import math
import numbers
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch

from .opcapture import OWN_OPS, Record, Sites, summarise

# CUDA's and the NPU's autocast default to float16; the CPU's to bfloat16
_DEFAULT_AMP_DTYPE = {"cpu": "bfloat16"}
_HYPERPARAMETERS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad",
                    "maximize", "alpha", "centered", "rho", "lr_decay", "initial_accumulator_value")


class ModeWatcher:
    """Records `Module.train(mode)` (and so `eval()`) calls that change a module's mode."""

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites
        self.depth = 0

    def install(self) -> None:
        watcher, original = self, torch.nn.Module.train

        def train(module: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
            if watcher.depth:
                return original(module, mode)
            before = [sub.training for sub in module.modules()]
            watcher.depth += 1
            try:
                result = original(module, mode)
            finally:
                watcher.depth -= 1
            changed = sum(b != sub.training for b, sub in zip(before, module.modules()))
            site, function = watcher.sites.here_in_function()
            if changed and site:
                watcher.record.add({"kind": "mode", "name": "train" if mode else "eval", "value": bool(mode),
                                    "class": type(module).__name__, "changed": changed, "site": site,
                                    "function": function})
            return result

        torch.nn.Module.train = train  # type: ignore[method-assign,assignment]


class RegionWatcher:
    """Records the autocast regions entered (the user's own arguments, before any device mapping)."""

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites

    def install(self) -> None:
        cls = torch.amp.autocast_mode.autocast
        original_init, original_enter, original_exit = cls.__init__, cls.__enter__, cls.__exit__
        watcher = self

        def init(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: Any = None) -> None:
            self._npu_migrate_asked = (str(device_type), dtype, bool(enabled))
            original_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        def enter(self: Any) -> Any:
            device, dtype, enabled = getattr(self, "_npu_migrate_asked", (getattr(self, "device", "?"), None, True))
            site, function = watcher.sites.here_in_function()
            if site:
                name = str(dtype).removeprefix("torch.") if dtype is not None else _DEFAULT_AMP_DTYPE.get(device, "float16")
                watcher.record.add({"kind": "region", "name": "autocast", "device": device, "dtype": name,
                                    "enabled": enabled, "site": site, "function": function})
            return original_enter(self)

        def exit_(self: Any, *args: Any) -> Any:
            return original_exit(self, *args)

        cls.__init__, cls.__enter__, cls.__exit__ = init, enter, exit_  # type: ignore[method-assign]


class HookWatcher:
    """Records the hooks the user's code registers on modules and tensors."""

    NAMES = ("register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
             "register_backward_hook", "register_full_backward_pre_hook")

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites

    def install(self) -> None:
        for name in self.NAMES:
            original = getattr(torch.nn.Module, name, None)
            if original is not None:
                setattr(torch.nn.Module, name, self._wrap(original, f"Module.{name}"))
        torch.Tensor.register_hook = self._wrap(torch.Tensor.register_hook, "Tensor.register_hook")  # type: ignore[method-assign]

    def _wrap(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        watcher, root = self, self.sites.root

        def register(owner: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(root):
                watcher.record.add({"kind": "hook", "name": label, "class": type(owner).__name__,
                                    "site": f"{caller.f_code.co_filename[len(root):]}:{caller.f_lineno}"})
            return original(owner, *args, **kwargs)

        return register


class SaveWatcher:
    """Records what the user's code passes to `torch.save`: every tensor (summarised) and scalar
    under its key path, modules as their state_dict."""

    def __init__(self, record: Record, sites: Sites) -> None:
        self.record, self.sites = record, sites

    def install(self) -> None:
        watcher, original, root = self, torch.save, self.sites.root

        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(root):
                OWN_OPS.depth += 1
                try:
                    entries = flatten_saved(obj)
                finally:
                    OWN_OPS.depth -= 1
                watcher.record.add({"kind": "save", "name": "torch.save", "entries": entries,
                                    "site": f"{caller.f_code.co_filename[len(root):]}:{caller.f_lineno}"})
            return original(obj, f, *args, **kwargs)

        torch.save = save


def flatten_saved(obj: Any, prefix: str = "", depth: int = 0) -> list[dict[str, Any]]:
    """[{"key": "model.fc.weight", "tensor": summary} | {"key": "epoch", "value": 3}, ...] of a saved object."""
    if depth > 8:
        return []
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, torch.optim.Optimizer):
        obj = obj.state_dict()
    if isinstance(obj, torch.Tensor):
        return [{"key": prefix or "<tensor>", "tensor": summarise(obj)}]
    if isinstance(obj, dict):
        return [e for k, v in obj.items() for e in flatten_saved(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [e for i, v in enumerate(obj) for e in flatten_saved(v, f"{prefix}.{i}" if prefix else str(i), depth + 1)]
    if isinstance(obj, (bool, str)) or obj is None:
        return [{"key": prefix or "<value>", "value": obj}]
    if isinstance(obj, numbers.Number):
        return [{"key": prefix or "<value>", "value": float(obj) if isinstance(obj, float) else obj}]
    return [{"key": prefix or "<object>", "value": type(obj).__name__}]


class LiveBytes:
    """Bytes of the storages that ops produced and that are still alive, by the user's line that
    produced them. Storages keep their Python object while alive (torch preserves it), so a
    finalizer on it fires when the memory is released, also when a view outlived its base."""

    def __init__(self) -> None:
        self.live: dict[int, tuple[int, str]] = {}
        self.by_site: dict[str, int] = {}
        self.current = self.peak = 0
        self.at_peak: dict[str, int] = {}
        self._snapshot_peak = 0

    def produced(self, tensor: torch.Tensor, site: str | None) -> None:
        owner: Any
        try:
            owner = tensor.untyped_storage()
            key, size = owner._cdata, owner.nbytes()
        except (RuntimeError, NotImplementedError, AttributeError, TypeError):
            if tensor.layout != torch.strided:  # sparse: no storage of its own to count
                return
            # a tensor subclass without a storage of its own (a wrapper): counted while it lives
            owner, key, size = tensor, id(tensor), tensor.numel() * tensor.element_size()
        if key in self.live or not size:
            return
        where = site or "<torch>"
        self.live[key] = (size, where)
        self.by_site[where] = self.by_site.get(where, 0) + size
        self.current += size
        weakref.finalize(owner, self._released, key)
        if self.current > self.peak:
            self.peak = self.current
            if self.peak > 1.05 * self._snapshot_peak:  # a snapshot per 5% of growth keeps this cheap
                self.at_peak, self._snapshot_peak = dict(self.by_site), self.peak

    def _released(self, key: int) -> None:
        size, where = self.live.pop(key, (0, ""))
        self.current -= size
        if where:
            self.by_site[where] -= size

    def result(self) -> dict[str, Any]:
        top = dict(sorted(self.at_peak.items(), key=lambda item: -item[1])[:50])
        return {"peak": self.peak, "end": self.current, "by_site": top,
                "method": "live storages of op outputs (CPU)"}


class Instances:
    """Weak references to every optimizer and to every model (a module called at the top level)."""

    def __init__(self) -> None:
        self.optimizers: list[weakref.ref[torch.optim.Optimizer]] = []
        self.models: list[weakref.ref[torch.nn.Module]] = []

    def install(self) -> None:
        instances, original = self, torch.optim.Optimizer.__init__

        def init(optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            original(optimizer, *args, **kwargs)
            instances.optimizers.append(weakref.ref(optimizer))

        torch.optim.Optimizer.__init__ = init  # type: ignore[method-assign,assignment]

    def model_called(self, module: torch.nn.Module) -> None:
        if not any(ref() is module for ref in self.models):
            self.models.append(weakref.ref(module))


def final_state(record: Record, instances: Instances) -> None:
    """Record the state the run ends with: optimizers (hyperparameters, state tensors) and models
    (each submodule's mode, every buffer)."""
    OWN_OPS.depth += 1
    try:
        for index, ref in enumerate(instances.optimizers):
            optimizer = ref()
            if optimizer is not None:
                record.add(_optimizer_state(index, optimizer))
        for index, model_ref in enumerate(instances.models):
            model = model_ref()
            if model is not None:
                record.add({"kind": "state", "name": f"model {index} ({type(model).__name__})", "what": "model",
                            "class": type(model).__name__, "built": model.__dict__.get("_npu_migrate_built"),
                            "modes": [sub.training for sub in model.modules()],
                            "buffers": [{"key": name, "tensor": summarise(buffer)}
                                        for name, buffer in model.named_buffers() if buffer is not None]})
    finally:
        OWN_OPS.depth -= 1


def _optimizer_state(index: int, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    groups = [{key: _plain(group[key]) for key in _HYPERPARAMETERS if key in group} for group in optimizer.param_groups]
    state = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in sorted(optimizer.state.get(param, {}).items()):
                entry: dict[str, Any] = {"key": str(key)}
                if isinstance(value, torch.Tensor) and value.numel() > 1:
                    entry["tensor"] = summarise(value)
                else:
                    entry["value"] = _plain(value)
                state.append(entry)
    return {"kind": "state", "name": f"optimizer {index} ({type(optimizer).__name__})", "what": "optimizer",
            "class": type(optimizer).__name__, "built": optimizer.__dict__.get("_npu_migrate_built"),
            "groups": groups, "state": state}


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return _plain(value.item()) if value.numel() == 1 else value.tolist()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value

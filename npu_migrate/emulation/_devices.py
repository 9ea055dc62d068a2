"""The npu device's entry points: `Tensor.npu()`, `Module.npu()`, `Tensor.is_npu`, and the
plain-Python parts of torch that take a device without dispatching on it (`torch.load`, generators,
events, the profiler, autocast bookkeeping, distributed backends).

The tensors themselves are `_tensor.NpuTensor`s: factories and `.to("npu")` reach the npu through
torch's dispatcher. `DeviceMapMode` is the older mechanism, still used by the verifier to map the
original code's "cuda" onto the CPU: a TorchFunctionMode that rewrites device arguments.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._autocast import clear_cache, install_npu_kernels
from ._state import MAPPING, STATE, set_attr
from ._tensor import backing, location_tag, npu_tensors_of, register_backend, restore_npu

NPU = MAPPING["device_type"]
DEVICE_KWARGS = tuple(MAPPING["device_kwargs"])


class DeviceMapMode(TorchFunctionMode):
    """Rewrites device arguments whose type is a key of `mapping` ({"npu": "cpu"})."""

    def __init__(self, mapping: dict[str, str]) -> None:
        super().__init__()
        self.mapping = mapping
        self._pattern = re.compile(r"^({})(?::(\d+))?$".format("|".join(map(re.escape, mapping))))

    def map(self, value: Any) -> Any:
        if isinstance(value, torch.device):
            target = self.mapping.get(value.type)
            if target is None:
                return value
            return torch.device(target, value.index) if target != "cpu" and value.index is not None \
                else torch.device(target)
        if isinstance(value, str):
            match = self._pattern.match(value)
            if match is None:
                return value
            target = self.mapping[match.group(1)]
            return f"{target}:{match.group(2)}" if match.group(2) and target != "cpu" else target
        if isinstance(value, dict):
            return {self.map(k): self.map(v) for k, v in value.items()}
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device or getattr(func, "__name__", "") == "_parse_to":
            # keep torch.device("npu", 0) and Module.to("npu")'s parsed device npu devices: they are
            # mapped where a tensor is made or moved (so the placement audit sees "npu" there)
            return func(*args, **kwargs)
        if args:
            args = tuple(self.map(a) if isinstance(a, (str, torch.device)) else a for a in args)
        for name in DEVICE_KWARGS:
            if name in kwargs:
                kwargs[name] = self.map(kwargs[name])
        return func(*args, **kwargs)


def _npu_device(device: Any) -> torch.device:
    if isinstance(device, int):
        return torch.device(NPU, device)
    return torch.device(device) if device is not None else torch.device(NPU, STATE.current_index)


def _tensor_npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):  # type: ignore[no-untyped-def]
    return self.to(_npu_device(device), non_blocking=non_blocking, memory_format=memory_format)


def _module_npu(self, device=None):  # type: ignore[no-untyped-def]
    return self.to(_npu_device(device))


def install_device() -> None:
    """The npu device itself (`_tensor`), its methods, and the Python entry points that torch
    does not route through a device: loading, pinning, generators, events, AMP, distributed."""
    register_backend()
    set_attr(torch.Tensor, "npu", _tensor_npu)
    set_attr(torch.Tensor, "is_npu", property(lambda self: False))  # NpuTensor says True
    set_attr(torch.nn.Module, "npu", _module_npu)
    if STATE.backing == "cpu":
        # host memory cannot be pinned for a CPU "device": pinning is an identity, as torch does
        # itself when no accelerator is present (DataLoader(pin_memory=True) must still work)
        set_attr(torch.Tensor, "pin_memory", lambda self, device=None: self)
        # the DataLoader's pinning thread asks the accelerator API for the device index
        set_attr(torch.accelerator, "current_device_index", lambda: STATE.current_index)
        set_attr(torch.accelerator, "set_device_index", lambda index: None)
    _foreach_kernels_for_npu_tensors()
    _backward_on_calling_thread()
    _patch_serialization()
    _patch_amp()
    _patch_distributed()
    _patch_device_objects()


def _foreach_kernels_for_npu_tensors() -> None:
    """Optimizers and clip_grad_norm_ take their foreach path on a device whose tensors are plain
    `torch.Tensor`s (torch_npu registers foreach kernels for the NPU); torch checks `type(p)`
    against a list of exact types, so without this an `NpuTensor` would loop per parameter, a
    different order of operations from a device's."""
    import torch.optim.optimizer as optimizer_module
    import torch.utils._foreach_utils as foreach_utils

    from ._tensor import NpuTensor

    lists: tuple[list[Any], ...] = (optimizer_module._foreach_supported_types, foreach_utils._foreach_supported_types)
    for supported in lists:
        if NpuTensor not in supported:
            supported.append(NpuTensor)
            STATE.undo.append(functools.partial(supported.remove, NpuTensor))


def _backward_on_calling_thread() -> None:
    """torch's autograd engine runs the nodes of a device other than the CPU on a thread of that
    device, so every backward pass through npu tensors would hand its work to another thread and
    wait for it: on a busy machine the wake-ups cost more than the emulated ops (the CNN bench
    model's backward took 6x its CPU time). The emulated device computes on the host, so the
    backward pass runs on the thread that calls it, as it does for CPU tensors (the engine's
    documented `set_multithreading_enabled(False)`, for the activating thread)."""
    switch = torch.autograd.set_multithreading_enabled(False)  # switches on construction
    STATE.undo.append(lambda: switch.__exit__(None, None, None))


def _patch_serialization() -> None:
    """torch.save writes npu tensors as a device does (storages located "npu:N"); torch.load
    brings them back on the npu, or where map_location says."""
    registry = torch.serialization._package_registry
    entry = (5, location_tag, restore_npu)  # before the CPU tagger (10) and torch's PrivateUse1 one
    registry.insert(0, entry)
    STATE.undo.append(lambda: registry.remove(entry) if entry in registry else None)
    original_load = torch.load

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        return npu_tensors_of(original_load(f, _restore_to(map_location), *args, **kwargs))

    set_attr(torch, "load", load)


def _restore_to(map_location: Any) -> Any:
    """torch.load's map_location, with "npu" targets kept on the host and marked as npu storages."""
    if map_location is None or callable(map_location):
        return map_location
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}
        return lambda storage, location: _place(storage, table.get(location, location))
    return lambda storage, location: _place(storage, map_location)


def _place(storage: Any, target: Any) -> Any:
    device = torch.device(target) if not isinstance(target, torch.device) else target
    if device.type == NPU:
        index = device.index if device.index is not None else STATE.current_index
        return restore_npu(storage, f"{NPU}:{index}")
    return storage if device.type == "cpu" else torch.serialization.default_restore_location(storage, str(device))


def _patch_device_objects() -> None:
    """torch.Generator("npu") and torch.Event("npu") reach the PrivateUse1 hooks in C++, which
    only a real torch_npu registers: construct them on the backing device instead."""

    def mapped_class(original: type, name: str, make: Any = None) -> type:
        def new(cls, device: Any = None, *args: Any, **kwargs: Any):
            if "device" in kwargs:
                device = kwargs.pop("device")
            if make is not None:
                return make(*args, **kwargs)
            if device is None:
                return original(*args, **kwargs)
            named = torch.device(device) if not isinstance(device, int) else torch.device(NPU, device)
            if named.type != NPU:
                return original(named, *args, **kwargs)
            return subclass(backing(named.index or 0), *args, **kwargs)  # draws on the backing device

        # isinstance(x, torch.Generator) must still hold for generators torch itself makes
        meta = type(f"{name}Type", (type(original),), {
            "__instancecheck__": lambda cls, obj: isinstance(obj, original),
            "__subclasscheck__": lambda cls, sub: issubclass(sub, original)})
        # reports the npu device (as torch_npu's generators do)
        subclass = type(f"Npu{name}", (original,), {"device": property(lambda self: torch.device(NPU, 0)),
                                                     "__module__": "torch"})
        return meta(name, (original,), {"__new__": new, "__module__": "torch"})

    profile_cls = torch.autograd.profiler.profile
    original_profile_init = profile_cls.__init__

    def profile_init(self, *args: Any, use_device: Any = None, **kwargs: Any) -> None:
        # the npu profiler is the backing device's: none on CPU (the CPU events are always kept)
        if use_device == MAPPING["device_type"]:
            use_device = "cuda" if STATE.backing == "cuda" else None
        original_profile_init(self, *args, use_device=use_device, **kwargs)

    set_attr(profile_cls, "__init__", profile_init)
    set_attr(torch, "Generator", mapped_class(torch._C.Generator, "Generator"))
    if hasattr(torch, "Event"):  # CPU has no events: there it is the emulated torch.npu.Event
        make = (lambda **kwargs: torch.npu.Event(**kwargs)) if STATE.backing == "cpu" else None  # type: ignore[attr-defined]
        set_attr(torch, "Event", mapped_class(torch.Event, "Event", make))


def _patch_amp() -> None:
    """torch's own autocast runs for "npu" (the PrivateUse1 autocast key, with the kernels of
    `_autocast`); this records that a region was entered and gives it torch_npu's default dtype."""
    install_npu_kernels(NPU)
    autocast_cls = torch.amp.autocast_mode.autocast
    original_init = autocast_cls.__init__
    default_dtype = getattr(torch, MAPPING["amp_default_dtype"])

    def autocast_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):  # type: ignore[no-untyped-def]
        if device_type == NPU:
            dtype = default_dtype if dtype is None else dtype
            if enabled:
                STATE.amp_used = True
        original_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    set_attr(autocast_cls, "__init__", autocast_init)
    original_clear = torch.clear_autocast_cache

    def clear_autocast_cache() -> None:
        original_clear()
        clear_cache()

    set_attr(torch, "clear_autocast_cache", clear_autocast_cache)


def _patch_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    from . import _collectives

    _collectives.register()
    aliases = MAPPING["dist_backends"]  # lccl: another npu backend of torch_npu, emulated as hccl

    def map_backend(backend: Any) -> Any:
        if not isinstance(backend, str):
            return backend
        device, _, name = backend.rpartition(":")
        if name in aliases:
            return f"{device}:{_collectives.NAME}" if device else _collectives.NAME
        return backend

    for func_name in ("init_process_group", "new_group"):
        original = getattr(dist, func_name)

        def wrapper(*args, __original=original, **kwargs):  # type: ignore[no-untyped-def]
            if "backend" in kwargs:
                kwargs["backend"] = map_backend(kwargs["backend"])
            elif args and __original.__name__ == "init_process_group":
                args = (map_backend(args[0]), *args[1:])
            device_id = kwargs.get("device_id")
            if device_id is not None and torch.device(device_id).type == NPU:
                kwargs.pop("device_id")  # eager connection is HCCL's own; the backing backend connects lazily
            return __original(*args, **kwargs)

        wrapper.__name__ = func_name
        set_attr(dist, func_name, wrapper)
    set_attr(dist, "is_hccl_available", lambda: True)

    ddp = torch.nn.parallel.DistributedDataParallel
    original_ddp_init = ddp.__init__

    def ddp_init(self, module, device_ids=None, output_device=None, *args, **kwargs):  # type: ignore[no-untyped-def]
        # DDP moves inputs for device_ids with the device module's streams, which the emulated
        # torch.npu has only in name; the module and its inputs are on the npu already
        original_ddp_init(self, module, None, None, *args, **kwargs)

    set_attr(ddp, "__init__", ddp_init)

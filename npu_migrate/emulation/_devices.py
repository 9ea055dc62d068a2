"""Device-string mapping: `"npu"`, `"npu:0"` and `torch.device("npu", 0)` are accepted wherever
torch takes a device and are redirected to the backing device (CPU, or CUDA when asked).

torch parses `"npu"` once `torch.utils.rename_privateuse1_backend("npu")` has run (torch_npu does
the same, torch_npu_api.md §4); the tensors themselves live on the backing device. A
TorchFunctionMode rewrites device arguments of every overridable torch call (factories, `.to`,
`new_*`); the few plain-Python entry points (`torch.load`, autocast, GradScaler, distributed) are
patched one by one.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._state import MAPPING, STATE, set_attr

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


def backing_device(device: Any = None) -> torch.device:
    """The real device that an npu device (or index, or None) stands for."""
    if STATE.backing == "cpu":
        return torch.device("cpu")
    if isinstance(device, int):
        return torch.device("cuda", device)
    if device is None:
        return torch.device("cuda", STATE.current_index)
    mapped = STATE.device_mode.map(device) if STATE.device_mode else device
    return torch.device(mapped)


def _npu_device(device: Any) -> torch.device:
    # an npu device, mapped to the backing one by DeviceMapMode (so the placement audit sees "npu")
    if isinstance(device, int):
        return torch.device(MAPPING["device_type"], device)
    return torch.device(device) if device is not None else torch.device(MAPPING["device_type"], STATE.current_index)


def _tensor_npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    return self.to(_npu_device(device), non_blocking=non_blocking, memory_format=memory_format)


def _module_npu(self, device=None):
    return self.to(_npu_device(device))


def _is_npu(self) -> bool:
    # An emulated npu tensor is a tensor on the backing device (documented limitation on CPU).
    return self.device.type == STATE.backing


def install_device_mapping() -> None:
    mode = DeviceMapMode({MAPPING["device_type"]: STATE.backing})
    mode.__enter__()
    STATE.device_mode = mode
    STATE.undo.append(lambda: mode.__exit__(None, None, None))

    set_attr(torch.Tensor, "npu", _tensor_npu)
    set_attr(torch.Tensor, "is_npu", property(_is_npu))
    set_attr(torch.nn.Module, "npu", _module_npu)
    if STATE.backing == "cpu":
        # host memory cannot be pinned for a CPU "device": pinning is an identity, as torch does
        # itself when no accelerator is present (DataLoader(pin_memory=True) must still work)
        set_attr(torch.Tensor, "pin_memory", lambda self, device=None: self)
        # the DataLoader's pinning thread asks the accelerator API for the device index
        set_attr(torch.accelerator, "current_device_index", lambda: STATE.current_index)
        set_attr(torch.accelerator, "set_device_index", lambda index: None)

    original_load = torch.load

    def load(*args, **kwargs):
        if "map_location" in kwargs:
            kwargs["map_location"] = mode.map(kwargs["map_location"])
        elif len(args) > 1:
            args = (args[0], mode.map(args[1])) + tuple(args[2:])
        return original_load(*args, **kwargs)

    set_attr(torch, "load", load)
    original_default = torch.set_default_device
    # torch keeps the default-device mode under every other mode, so map the device up front
    def set_default_device(device: Any) -> None:
        if STATE.audit is not None:  # torch's default-device mode sits below the audit
            named = str(device).split(":")[0] if device is not None else "cpu"
            STATE.audit.default_device = "npu" if named == MAPPING["device_type"] else "cpu"
        original_default(mode.map(device))

    set_attr(torch, "set_default_device", set_default_device)
    _patch_amp(mode)
    _patch_distributed()
    _patch_device_objects(mode)


def _patch_device_objects(mode: DeviceMapMode) -> None:
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
            return original(mode.map(device), *args, **kwargs)

        # isinstance(x, torch.Generator) must still hold for generators torch itself makes
        meta = type(f"{name}Type", (type(original),), {
            "__instancecheck__": lambda cls, obj: isinstance(obj, original),
            "__subclasscheck__": lambda cls, sub: issubclass(sub, original)})
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


def _patch_amp(mode: DeviceMapMode) -> None:
    autocast_cls = torch.amp.autocast_mode.autocast
    original_init = autocast_cls.__init__
    npu = MAPPING["device_type"]
    default_dtype = getattr(torch, MAPPING["amp_default_dtype"])

    def autocast_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == npu:
            device_type = STATE.backing
            dtype = default_dtype if dtype is None else dtype
            if enabled:
                STATE.amp_used = True
        original_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    set_attr(autocast_cls, "__init__", autocast_init)

    scaler_cls = torch.amp.GradScaler
    original_scaler_init = scaler_cls.__init__

    def scaler_init(self, device="cuda", *args, **kwargs):
        original_scaler_init(self, mode.map(device), *args, **kwargs)

    set_attr(scaler_cls, "__init__", scaler_init)


def _patch_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    backends = MAPPING["dist_backends"]

    def map_backend(backend: Any) -> Any:
        if not isinstance(backend, str):
            return backend
        # "hccl" or "npu:hccl" (torch_npu_api.md §1.4); other backends pass through
        device, _, name = backend.rpartition(":")
        if name in backends:
            target = backends[name][STATE.backing]
            return f"{STATE.backing}:{target}" if device else target
        return backend

    for func_name in ("init_process_group", "new_group"):
        original = getattr(dist, func_name)

        def wrapper(*args, __original=original, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = map_backend(kwargs["backend"])
            elif args and __original.__name__ == "init_process_group":
                args = (map_backend(args[0]),) + tuple(args[1:])
            if "device_id" in kwargs and STATE.device_mode is not None:
                kwargs["device_id"] = STATE.device_mode.map(kwargs["device_id"])
                if kwargs["device_id"] == torch.device("cpu"):
                    kwargs.pop("device_id")
            return __original(*args, **kwargs)

        wrapper.__name__ = func_name
        set_attr(dist, func_name, wrapper)
    set_attr(dist, "is_hccl_available", lambda: True)
    if STATE.backing == "cpu":
        _patch_barrier(dist)

    ddp = torch.nn.parallel.DistributedDataParallel
    original_ddp_init = ddp.__init__

    def ddp_init(self, module, device_ids=None, output_device=None, *args, **kwargs):
        if STATE.backing == "cpu":  # DDP wants no device ids for a CPU module
            device_ids = output_device = None
        original_ddp_init(self, module, device_ids, output_device, *args, **kwargs)

    set_attr(ddp, "__init__", ddp_init)


def _patch_barrier(dist: Any) -> None:
    """barrier() asks torch._C._get_accelerator(), which is "npu" once the backend is renamed and
    then needs the PrivateUse1 hooks of a real torch_npu: on a CPU backing the group is gloo, so
    the barrier runs on the CPU, as `device_ids` cannot name a CPU device."""
    import torch.distributed.distributed_c10d as c10d

    original = c10d.barrier

    def barrier(group=None, async_op=False, device_ids=None):
        saved = torch._C._get_accelerator
        torch._C._get_accelerator = lambda: torch.device("cpu")  # type: ignore[misc]
        try:
            return original(group=group, async_op=async_op)
        finally:
            torch._C._get_accelerator = saved

    set_attr(dist, "barrier", barrier)
    set_attr(c10d, "barrier", barrier)

"""Device-placement audit and the emulated device's own random stream.

On CPU every emulated "npu" tensor is a CPU tensor, so by itself the emulation cannot see a tensor
the migrated code forgot to move. The audit gives every storage a logical device ("npu" or "cpu"),
set where a torch call creates it (a device argument, `.to()`, `.npu()`, `.cpu()`, or the devices
of its tensor arguments), and raises the error a device raises when one call mixes an npu tensor
with a CPU tensor that has dimensions, naming where the CPU tensor was made. Tensors the audit did
not see made (autograd's gradients, tensors built in C++) carry no device and are never blamed.

The random stream: a device draws its random numbers from its own generator (Philox on Ascend), not
the CPU's. With `separate_rng`, random calls on npu tensors draw from a generator of their own,
seeded by torch.manual_seed / torch.npu.manual_seed like the device's, so a train-mode run gets
dropout masks that differ from the CPU's, as it does on hardware.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._state import INTERNAL_OPS, STATE

NPU, CPU = "npu", "cpu"
_TAG = "_npu_migrate_device"
_SITE = "_npu_migrate_site"
# mixing is allowed here on a device too: indexing with CPU indices, copying across devices
_MIX_ALLOWED = {"__getitem__", "__setitem__", "copy_", "to", "cpu", "npu", "cuda", "type_as", "set_",
                "__get__", "__set__", "device", "is_npu", "numel", "size", "dim", "backward"}
_RANDOM = {"dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
           "dropout3d", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
           "randperm", "bernoulli", "bernoulli_", "normal", "normal_", "uniform_", "multinomial",
           "exponential_", "random_", "cauchy_", "geometric_", "log_normal_", "rrelu", "gumbel_softmax",
           "native_dropout", "fused_dropout"}
_PACKAGE_DIRS = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (torch,)) + (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)
_NPU_SEED_SALT = 0x9E3779B9  # the device's stream differs from the CPU's for the same seed


def device_of(tensor: torch.Tensor) -> str | None:
    try:
        return getattr(tensor.untyped_storage(), _TAG, None)
    except (RuntimeError, NotImplementedError):
        return None


def _site_of(tensor: torch.Tensor) -> str | None:
    """Where the tensor was made: its own line when it is a view (a slice of a CPU batch), else
    its storage's."""
    own = tensor.__dict__.get(_SITE)
    if own is not None:
        return own
    try:
        return getattr(tensor.untyped_storage(), _SITE, None)
    except (RuntimeError, NotImplementedError):
        return None


def _tag(tensor: torch.Tensor, device: str, site: str | None, overwrite: bool) -> None:
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return
    if overwrite or not hasattr(storage, _TAG):
        setattr(storage, _TAG, device)
        setattr(storage, _SITE, site)


def user_site(callers: int = 2) -> str | None:
    """file:line of the innermost frame outside torch, this package and the standard library,
    followed by up to `callers` such frames that called it: "a.py:93 < a.py:105"."""
    frame = sys._getframe(2)
    stdlib = os.path.dirname(os.__file__) + os.sep
    found: list[str] = []
    while frame is not None and len(found) <= callers:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIRS) and not path.startswith(stdlib) and not path.startswith("<"):
            found.append(f"{path}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(found) or None


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _named_device(func: Any, args: tuple, kwargs: dict[str, Any], names: tuple[str, ...]) -> str | None:
    """The logical device a call names explicitly (device=..., .to("npu"), .cpu(), .npu())."""
    name = getattr(func, "__name__", "")
    if name == "cpu":
        return CPU
    if name in ("npu", "cuda"):
        return NPU
    candidates = [kwargs.get(k) for k in names if k in kwargs]
    if name == "to":
        candidates += list(args[1:])
    for value in candidates:
        if isinstance(value, torch.Tensor):
            return device_of(value)
        if isinstance(value, (str, torch.device)):
            kind = torch.device(value).type if not isinstance(value, str) else value.split(":")[0]
            if kind == NPU:
                return NPU
            if kind == "cpu":
                return CPU
    return None


class PlacementAudit(TorchFunctionMode):
    """Tags what each torch call creates with its logical device; raises on a CPU/NPU mix.
    Sits above the device-mapping mode, so it sees "npu" device arguments before they are mapped."""

    def __init__(self, device_kwargs: tuple[str, ...], separate_rng: bool) -> None:
        super().__init__()
        self.device_kwargs = device_kwargs
        self.separate_rng = separate_rng
        self.default_device = CPU
        self.npu_generator = torch.Generator()
        self.npu_generator.manual_seed(torch.initial_seed() ^ _NPU_SEED_SALT)

    def seed(self, seed: int) -> None:
        self.npu_generator.manual_seed(int(seed) ^ _NPU_SEED_SALT)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "__get__" and getattr(func, "__self__", None) is torch.Tensor.device:
            tensor = args[0]
            if device_of(tensor) == NPU:
                return torch.device(NPU, STATE.current_index)
            return func(*args, **kwargs)
        if name == "numpy" and args and device_of(args[0]) == NPU:
            raise TypeError("can't convert npu:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first. (npu-migrate emulation: placement audit)")
        named = _named_device(func, args, kwargs, self.device_kwargs)
        inputs = [t for a in list(args) + list(kwargs.values()) for t in _tensors(a)]
        devices = {device_of(t) for t in inputs if t.dim() > 0} - {None}
        mixed = named is None and len(devices) > 1 and name not in _MIX_ALLOWED
        if named is None:
            tagged = {device_of(t) for t in inputs} - {None}  # 0-dim ones too: they name the result
            named = NPU if NPU in tagged else (
                CPU if tagged == {CPU} else (None if inputs else self.default_device))
        if self.separate_rng and named == NPU and name in _RANDOM:
            out = self._on_npu_stream(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        if mixed and _tensors(out):  # a computation, not a query such as torch.equal or a type check
            self._raise_mix(name, inputs)
        if name in ("to", "cpu", "npu", "cuda") and isinstance(out, torch.Tensor) and inputs \
                and out.untyped_storage() is inputs[0].untyped_storage() and device_of(inputs[0]) != named:
            INTERNAL_OPS.depth += 1  # on the CPU .to() returns self; a device makes a copy of its own
            try:
                out = out.clone()
            finally:
                INTERNAL_OPS.depth -= 1
        if named is not None:
            self._tag_outputs(out, named, inputs)
        return out

    def _tag_outputs(self, out: Any, device: str, inputs: list[torch.Tensor]) -> None:
        site = None
        for tensor in _tensors(out):
            if any(tensor.untyped_storage() is t.untyped_storage() for t in inputs):
                # a view or an in-place result keeps its storage's device; a new view object
                # remembers its own line (the slice that was not moved)
                if all(tensor is not t for t in inputs) and tensor.shape != inputs[0].shape:
                    tensor.__dict__[_SITE] = user_site()
                continue
            if site is None:
                site = user_site()
            _tag(tensor, device, site, overwrite=True)

    def _raise_mix(self, name: str, inputs: list[torch.Tensor]) -> None:
        cpu_tensor = next(t for t in inputs if device_of(t) == CPU and t.dim() > 0)
        made = _site_of(cpu_tensor)
        where = f"; the CPU tensor {list(cpu_tensor.shape)} was made at {made}" if made else ""
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                           f"devices, npu:{STATE.current_index} and cpu! (in {name}; npu-migrate "
                           f"emulation: placement audit{where})")

    def _on_npu_stream(self, func, args, kwargs):
        cpu_state = torch.default_generator.get_state()
        torch.default_generator.set_state(self.npu_generator.get_state())
        try:
            return func(*args, **kwargs)
        finally:
            self.npu_generator.set_state(torch.default_generator.get_state())
            torch.default_generator.set_state(cpu_state)


def _tag_loader_batches() -> None:
    """A DataLoader's batches are host tensors, also when worker processes rebuilt them from shared
    memory (which no torch call of this process made): tag them "cpu" where they come out."""
    from torch.utils.data import dataloader

    from ._state import set_attr

    original = dataloader._BaseDataLoaderIter.__next__

    def next_batch(self):
        batch = original(self)
        for tensor in _leaves(batch):
            _tag(tensor, CPU, user_site(), overwrite=False)
        return batch

    set_attr(dataloader._BaseDataLoaderIter, "__next__", next_batch)


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return []


def install(device_kwargs: tuple[str, ...], separate_rng: bool) -> PlacementAudit:
    """Enter the audit above the device mapping; undone by deactivate()."""
    _tag_loader_batches()
    audit = PlacementAudit(device_kwargs, separate_rng)
    audit.__enter__()
    STATE.audit = audit
    STATE.undo.append(lambda: (audit.__exit__(None, None, None), setattr(STATE, "audit", None)))
    return audit

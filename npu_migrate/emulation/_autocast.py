"""Autocast on the emulated npu, and the device's autocast op lists for CUDA code run on the CPU.

The npu: `torch.autocast("npu")` is torch's own autocast for the PrivateUse1 backend; it enables
the AutocastPrivateUse1 dispatch key, for which torch_npu registers its kernels (torch_npu_api.md
2.3, `AutoCastOps.cpp`). `install_npu_kernels` registers Python kernels there for the aten ops of
upstream CUDA autocast's lists (`autocast.json`, "device"), with CUDA's cast policies: lower
precision (the autocast dtype), float32, float32 through the op's own dtype argument, and promotion
to the widest input type. They cast above autograd, as a device's autocast does, and cache the
casts of leaf tensors that require grad (weights) until the outermost region exits.

The CPU (`DeviceAutocast`, for the verifier's noise run of CUDA code on a CPU): the CPU's op lists are not a GPU's or an NPU's: on the CPU, softmax, log_softmax, layer_norm,
exp, log, pow, sum and the losses run in bfloat16/float16 when their input is, while a CUDA device
runs them in float32; and einsum, mv, addmv, addr and the RNN cells stay float32 on the CPU where
a CUDA device lowers them. torch_npu registers its autocast kernels for the PrivateUse1 key with
the lists of upstream CUDA autocast (torch_npu_api.md 2.3, `AutoCastOps.cpp`; that the lists are
CUDA's is inferred from upstream `autocast_mode.cpp`, not measured on a device).

`DeviceAutocast` is a TorchFunctionMode that, while autocast is enabled on the backing device,
casts the floating inputs of the ops of CUDA's float32 lists to float32 and those of CUDA's
lower-precision list (the ones the CPU list lacks) to the autocast dtype, before the CPU autocast
sees them. Ops in neither list run in their inputs' dtype, as on the device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._state import AUTOCAST

_LISTS = AUTOCAST["cpu_differences"]
LOWER = frozenset(_LISTS["lower"])
FLOAT32 = frozenset(_LISTS["float32"])
_LOW = (torch.float16, torch.bfloat16)


def _cast(value: Any, dtype: torch.dtype, sources: tuple[torch.dtype, ...]) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.dtype in sources else value
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_cast(v, dtype, sources) for v in value)
    return value


class DeviceAutocast(TorchFunctionMode):
    """Apply the device's (CUDA's) autocast lists while autocast is on for `device_type`."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.is_autocast_enabled(self.device_type):
            name = getattr(func, "__name__", "")
            if name == "cross_entropy":
                composed = _device_cross_entropy(args, kwargs)
                if composed is not None:
                    return composed
            if name in FLOAT32 and kwargs.get("dtype") is None:
                args, kwargs = self._all(args, kwargs, torch.float32, _LOW)
            elif name in LOWER:
                args, kwargs = self._all(args, kwargs, torch.get_autocast_dtype(self.device_type), (torch.float32,))
        return func(*args, **kwargs)

    @staticmethod
    def _all(args: tuple, kwargs: dict, dtype: torch.dtype, sources: tuple[torch.dtype, ...]) -> tuple[tuple, dict]:
        return (tuple(_cast(a, dtype, sources) for a in args),
                {k: _cast(v, dtype, sources) for k, v in kwargs.items()})


_CROSS_ENTROPY = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                  "label_smoothing")


def _device_cross_entropy(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """`F.cross_entropy` of class indices as a device's autocast runs it: the op has no autocast
    kernel there (the CPU has one, float32 for the whole op), so its composite runs:
    `log_softmax(x, dim, dtype=x.dtype)`, which keeps the explicit lower dtype, then `nll_loss`,
    which is on the float32 list. None for what this does not cover (probabilities as targets,
    label smoothing, the deprecated size_average/reduce): those keep the float32 cast."""
    bound = dict(zip(_CROSS_ENTROPY, args)) | kwargs
    logits, target = bound.get("input"), bound.get("target")
    if not (isinstance(logits, torch.Tensor) and logits.dtype in _LOW and isinstance(target, torch.Tensor)
            and not target.is_floating_point() and not bound.get("label_smoothing")
            and bound.get("size_average") is None and bound.get("reduce") is None):
        return None
    log_probs = torch.log_softmax(logits, 0 if logits.dim() == 1 else 1, dtype=logits.dtype)
    weight = bound.get("weight")
    return torch.nn.functional.nll_loss(
        log_probs.float(), target, weight.float() if isinstance(weight, torch.Tensor) else None,
        ignore_index=bound.get("ignore_index", -100), reduction=bound.get("reduction", "mean"))


def install(device_type: str) -> DeviceAutocast:
    mode = DeviceAutocast(device_type)
    mode.__enter__()
    return mode


# ---- the npu's autocast kernels ------------------------------------------------------------------
_NPU_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.__members__["AutocastPrivateUse1"])
_CACHE: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(leaf) -> (leaf, its cast)
_KERNELS: list[Any] = []  # the library holding them (registrations live as long as it does)


def _eligible(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


def _cached_cast(value: Any, dtype: torch.dtype) -> Any:
    if not _eligible(value) or value.dtype == dtype:
        return value
    cacheable = value.is_leaf and value.requires_grad and torch.is_autocast_cache_enabled()
    if cacheable:
        hit = _CACHE.get(id(value))
        if hit is not None and hit[0] is value and hit[1].dtype == dtype:
            return hit[1]
    cast = value.to(dtype)
    if cacheable:
        _CACHE[id(value)] = (value, cast)
    return cast


def _map(values: Any, dtype: torch.dtype) -> Any:
    if isinstance(values, (list, tuple)):
        return type(values)(_map(v, dtype) for v in values)
    return _cached_cast(values, dtype)


def _tensors(values: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _kernel(op: Any, policy: str, device_type: str) -> Any:
    positions = [i for i, a in enumerate(op._schema.arguments) if a.name == "dtype" and not a.kwarg_only]
    dtype_at = positions[0] if positions else None

    def run(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(_NPU_KEY):
            if policy == "lower_precision_fp":
                dtype = torch.get_autocast_dtype(device_type)
            elif policy == "promote":
                floats = [t.dtype for t in _tensors(list(args) + list(kwargs.values())) if t.is_floating_point()]
                dtype = max(floats, key=lambda d: torch.finfo(d).bits, default=torch.float32)
                if torch.float32 in floats and dtype != torch.float64:
                    dtype = torch.float32
            elif policy == "fp32_set_opt_dtype":
                first = next(iter(_tensors(args)), None)
                if dtype_at is not None and len(args) > dtype_at:
                    if args[dtype_at] is None and _eligible(first):
                        args = (*args[:dtype_at], torch.float32, *args[dtype_at + 1:])
                elif kwargs.get("dtype") is None and _eligible(first):
                    kwargs["dtype"] = torch.float32
                return op(*args, **kwargs)
            else:
                dtype = torch.float32
            # right to left, as a device's C++ autocast kernels cast their arguments (GCC evaluates
            # a call's arguments from the last): the weight's cast before the input's, as in the
            # CPU's (the verifier's reference) and a device's op order
            cast_kwargs = {k: _map(v, dtype) for k, v in reversed(kwargs.items())}
            cast_args = [_map(a, dtype) for a in reversed(args)][::-1]
            return op(*cast_args, **dict(reversed(cast_kwargs.items())))

    return run


def install_npu_kernels(device_type: str) -> None:
    """Once per process: the AutocastPrivateUse1 kernels (they run only while autocast is on for
    the npu, the key being excluded otherwise). torch.clear_autocast_cache() also clears the cache
    of cast weights, as autocast's exit does for a device."""
    if _KERNELS:
        return
    library = torch.library.Library("aten", "IMPL")
    for policy, names in AUTOCAST["device"].items():
        for qualified in names:
            name, _, overload = qualified.partition(".")
            op = getattr(getattr(torch.ops.aten, name), overload or "default")
            library.impl(qualified, _kernel(op, policy, device_type), "AutocastPrivateUse1")
    everything_else = torch.library.Library("_", "IMPL")  # as torch_npu: other ops fall through
    everything_else.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    _KERNELS.extend((library, everything_else))


def clear_cache() -> None:
    _CACHE.clear()

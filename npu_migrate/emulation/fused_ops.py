"""Reference implementations of what the `tune` rules (NPU600-NPU613) write: torch_npu's fused
optimizers and the fused operators, computing what torch_npu documents, constraints included,
so that `npu-migrate verify` on a tuned program proves the rewrite or finds where it breaks.

- `torch_npu.optim.NpuFused{Adam,AdamW,SGD,Adadelta,RMSprop}`: as torch_npu's
  (`torch_npu/optim/npu_fused_*.py`), every float32 / float16 parameter, gradient and state of a
  group is moved into one contiguous buffer at the first step (the parameters and gradients
  become views of it) and updated there, with torch.optim's formula in torch's order of
  operations (bit for bit the same numbers: a device kernel's own rounding is verify's noise run's
  business, not a second CPU order); `zero_grad()` fills the buffer with zeros,
  `zero_grad(set_to_none=True)` raises, other dtypes raise TypeError. A gradient replaced after the
  first step (a module's `zero_grad()` in torch >= 2.0) is not seen, as on the device.
- `npu_rms_norm` (float32 inside, gamma applied before the cast to the input's dtype, `rstd` in
  float32), `npu_rotary_mul` (3-D/4-D, modes `half` and `interleave`), `npu_swiglu` (the split
  dimension must be even) and `npu_fusion_attention` (without `atten_mask` the sparse modes do not
  apply: full attention, as op-plugin documents; head dim up to 768; key and value of one shape).

`register(root, make_module)` installs them on the emulated `torch_npu` (called from
`_namespace.build_modules`).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from . import ops
from ._state import EmulationError
from ._tensor import NpuTensor

FUSED_DTYPES = (torch.float32, torch.float16)


# -- the fused optimizers -------------------------------------------------------------------

def _combine(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """One buffer holding `tensors`, each of which becomes a view of it (as npu_combine_tensors)."""
    if not tensors:
        return None
    # no per-tensor detach: verify pairs ops by name and shape, and a parameter's detach here paired
    # with the original SGD's first `clone(grad).detach()` of the same shape (another value)
    with torch.no_grad():
        flat = torch.cat([t.reshape(-1) for t in tensors])
    offset = 0
    for tensor in tensors:
        size = tensor.numel()
        _alias(tensor, flat[offset:offset + size].view_as(tensor))
        offset += size
    return flat


def _alias(tensor: torch.Tensor, view: torch.Tensor) -> None:
    """Make `tensor` (a parameter, gradient or state, kept by its owner) share `view`'s memory.
    A tensor on the emulated npu keeps its data in `backing_tensor`, which `.data =` would not
    replace (the wrapper's Python attributes stay): its backing becomes the view's backing."""
    if isinstance(tensor, NpuTensor) and isinstance(view, NpuTensor):
        tensor.backing_tensor = view.backing_tensor
    else:
        tensor.data = view


class NpuFusedOptimizerBase(torch.optim.Optimizer):
    """Combines per dtype at the first step, then updates the combined buffers of each group."""

    STATES: tuple[str, ...] = ()
    COUNTS_STEPS = True  # a per-parameter `state["step"]`, as torch_npu's fused Adam/Adadelta/RMSprop

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        super().__init__(params, defaults)
        self.combined: list[dict[torch.dtype, dict[str, Any]]] | None = None

    def _combine_all(self) -> None:
        self.combined = []
        for group in self.param_groups:
            per_dtype: dict[torch.dtype, dict[str, Any]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.dtype not in FUSED_DTYPES:
                    raise TypeError("Fused optimizer's parameters must be either float32 or float16, "
                                    f"but received {p.dtype}")
                per_dtype.setdefault(p.dtype, {"params": []})["params"].append(p)
            for bucket in per_dtype.values():
                params = bucket["params"]
                for p in params:
                    self._init_state(p, group)
                bucket["param"] = _combine(params)
                bucket["grad"] = _combine([p.grad for p in params])
                for name in self.STATES:
                    if all(name in self.state[p] for p in params):
                        bucket[name] = _combine([self.state[p][name] for p in params])
                bucket["step"] = 0
            self.combined.append(per_dtype)

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        state = self.state[p]
        if self.COUNTS_STEPS and "step" not in state:
            state["step"] = 0
        for name in self.STATES:
            if name not in state and self._needs_state(name, group):
                state[name] = torch.zeros_like(p)

    def _needs_state(self, name: str, group: dict[str, Any]) -> bool:
        return True

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = closure() if closure is not None else None
        if self.combined is None:
            self._combine_all()
        assert self.combined is not None
        for group, per_dtype in zip(self.param_groups, self.combined):
            for bucket in per_dtype.values():
                for p in bucket["params"]:
                    if self.COUNTS_STEPS:
                        self.state[p]["step"] += 1
                bucket["step"] += 1
                self._update(group, bucket)
        return loss

    def _update(self, group: dict[str, Any], bucket: dict[str, Any]) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def zero_grad(self, set_to_none: bool = False) -> None:
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers")
        if self.combined is None:
            super().zero_grad(set_to_none=False)
            return
        for per_dtype in self.combined:
            for bucket in per_dtype.values():
                bucket["grad"].zero_()


def _check(lr: float, eps: float = 0.0, weight_decay: float = 0.0) -> None:
    if lr < 0.0 or eps < 0.0 or weight_decay < 0.0:
        raise ValueError(f"Invalid optimizer value: lr={lr}, eps={eps}, weight_decay={weight_decay}")


class _AdamBase(NpuFusedOptimizerBase):
    STATES = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    DECOUPLED = False

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False) -> None:
        _check(lr, eps, weight_decay)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad})

    def _needs_state(self, name: str, group: dict[str, Any]) -> bool:
        return name != "max_exp_avg_sq" or group["amsgrad"]

    def _update(self, group: dict[str, Any], bucket: dict[str, Any]) -> None:
        param, grad, step = bucket["param"], bucket["grad"], bucket["step"]
        beta1, beta2 = group["betas"]
        if self.DECOUPLED:
            param.mul_(1 - group["lr"] * group["weight_decay"])
        elif group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        exp_avg, exp_avg_sq = bucket["exp_avg"], bucket["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)  # torch.optim's foreach order (the same formula)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        second = exp_avg_sq
        if group["amsgrad"]:
            torch.maximum(bucket["max_exp_avg_sq"], exp_avg_sq, out=bucket["max_exp_avg_sq"])
            second = bucket["max_exp_avg_sq"]
        denom = (second.sqrt() / math.sqrt(1 - beta2 ** step)).add_(group["eps"])
        param.addcdiv_(exp_avg, denom, value=-group["lr"] / (1 - beta1 ** step))


class NpuFusedAdam(_AdamBase):
    """Adam with an L2 penalty added to the gradient (torch.optim.Adam's formula)."""


class NpuFusedAdamW(_AdamBase):
    """AdamW: decoupled weight decay, default 1e-2 (torch.optim.AdamW's formula)."""

    DECOUPLED = True

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


class NpuFusedSGD(NpuFusedOptimizerBase):
    STATES = ("momentum_buffer",)
    COUNTS_STEPS = False  # torch_npu's npu_fused_sgd.py keeps no per-parameter `step`, as torch.optim.SGD
    _REQUIRED = object()

    def __init__(self, params: Any, lr: Any = _REQUIRED, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        if lr is self._REQUIRED:
            raise TypeError("NpuFusedSGD() missing its learning rate `lr` (torch_npu gives no default)")
        _check(lr, 0.0, weight_decay)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay, "nesterov": nesterov})

    def _needs_state(self, name: str, group: dict[str, Any]) -> bool:
        return False  # the momentum buffer starts from the first gradient, in _update

    def _update(self, group: dict[str, Any], bucket: dict[str, Any]) -> None:
        param, grad = bucket["param"], bucket["grad"]
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        if group["momentum"] != 0:
            if "momentum_buffer" not in bucket:
                bucket["momentum_buffer"] = grad.detach().clone()
                for p, view in zip(bucket["params"], _views(bucket["momentum_buffer"], bucket["params"])):
                    self.state[p]["momentum_buffer"] = view
            else:
                bucket["momentum_buffer"].mul_(group["momentum"]).add_(grad, alpha=1 - group["dampening"])
            buf = bucket["momentum_buffer"]
            grad = grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
        param.add_(grad, alpha=-group["lr"])


def _views(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    views, offset = [], 0
    for tensor in like:
        views.append(flat[offset:offset + tensor.numel()].view_as(tensor))
        offset += tensor.numel()
    return views


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    STATES = ("square_avg", "acc_delta")

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0) -> None:
        _check(lr, eps, weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay})

    def _update(self, group: dict[str, Any], bucket: dict[str, Any]) -> None:
        param, grad = bucket["param"], bucket["grad"]
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        bucket["square_avg"].mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = bucket["square_avg"].add(eps).sqrt_()
        delta = bucket["acc_delta"].add(eps).sqrt_().div_(std).mul_(grad)
        param.add_(delta, alpha=-group["lr"])
        bucket["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    STATES = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> None:
        _check(lr, eps, weight_decay)
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay, "momentum": momentum, "centered": centered})

    def _needs_state(self, name: str, group: dict[str, Any]) -> bool:
        return name == "square_avg" or (name == "momentum_buffer" and group["momentum"] > 0) or \
            (name == "grad_avg" and group["centered"])

    def _update(self, group: dict[str, Any], bucket: dict[str, Any]) -> None:
        param, grad, alpha = bucket["param"], bucket["grad"], group["alpha"]
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        square_avg = bucket["square_avg"].mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = bucket["grad_avg"].lerp_(grad, 1 - alpha)  # torch.optim's foreach order
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
        else:
            avg = square_avg.sqrt().add_(group["eps"])
        if group["momentum"] > 0:
            buf = bucket["momentum_buffer"].mul_(group["momentum"]).addcdiv_(grad, avg)
            param.add_(buf, alpha=-group["lr"])
        else:
            param.addcdiv_(grad, avg, value=-group["lr"])


OPTIMIZERS = (NpuFusedOptimizerBase, NpuFusedAdam, NpuFusedAdamW, NpuFusedSGD, NpuFusedAdadelta, NpuFusedRMSprop)


# -- the fused operators -------------------------------------------------------------------------

def npu_rms_norm(x: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd): y = x * rstd * gamma computed in float32 and cast to x's dtype; rstd float32."""
    if not 1 <= x.dim() <= 8:
        raise EmulationError(f"npu_rms_norm: input of {x.dim()} dimensions (1 to 8 are accepted)")
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return (x32 * rstd * gamma.float()).to(x.dtype), rstd


def npu_rotary_mul(x: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half",
                   rotate: torch.Tensor | None = None) -> torch.Tensor:
    for name, tensor in (("input", x), ("r1", r1), ("r2", r2)):
        if tensor.dim() not in (3, 4):
            raise EmulationError(f"npu_rotary_mul: {name} has {tensor.dim()} dimensions (3 or 4 are accepted)")
    if rotate is not None:
        return x * r1 + torch.matmul(x, rotate) * r2
    if rotary_mode == "half":
        first, second = x.chunk(2, dim=-1)
        turned = torch.cat((-second, first), dim=-1)
    elif rotary_mode == "interleave":
        turned = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    else:
        raise EmulationError(f"npu_rotary_mul: rotary_mode={rotary_mode!r} ('half' or 'interleave')")
    return x * r1 + turned * r2


def npu_swiglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    if x.shape[dim] % 2:
        raise EmulationError(f"npu_swiglu: dimension {dim} has odd size {x.shape[dim]}")
    a, b = x.chunk(2, dim=dim)
    return F.silu(a) * b


def npu_fusion_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, head_num: int,
                         input_layout: str, *args: Any, **kwargs: Any) -> Any:
    """Checks op-plugin's constraints, then ops.npu_fusion_attention. The causal sparse modes (2, 3)
    take the compressed mask torch_npu documents for them; without it the call raises."""
    names = ("pse", "padding_mask", "atten_mask", "scale", "keep_prob", "pre_tockens", "next_tockens",
             "inner_precise", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode")
    kwargs.update(zip(names, args))
    if key.shape != value.shape:
        raise EmulationError(f"npu_fusion_attention: key {tuple(key.shape)} and value {tuple(value.shape)} differ")
    if query.shape[-1] > 768 and input_layout in ("BNSD", "BSND"):
        raise EmulationError(f"npu_fusion_attention: head dim {query.shape[-1]} (at most 768)")
    if input_layout in ("BNSD", "BSND") and query.dim() != 4:
        raise EmulationError(f"npu_fusion_attention: layout {input_layout} needs 4-D query, got {query.dim()}-D")
    if input_layout == "TND":
        _check_varlen(query, head_num, kwargs)
    if input_layout == "BNSD" and query.shape[1] != head_num:
        raise EmulationError(f"npu_fusion_attention: head_num {head_num} but the query has {query.shape[1]} heads")
    if not (query.dtype == key.dtype == value.dtype):
        raise EmulationError("npu_fusion_attention: query, key and value must have one dtype")
    if kwargs.get("atten_mask") is None and kwargs.get("sparse_mode", 0) in (2, 3):
        # torch_npu documents these causal modes with the compressed 2048x2048 lower-triangle
        # mask passed in; without it the call is outside the documented contract
        raise EmulationError(f"npu_fusion_attention: sparse_mode={kwargs['sparse_mode']} needs atten_mask "
                             "(the compressed 2048x2048 upper-triangle mask, True = masked out)")
    return ops.npu_fusion_attention(query, key, value, head_num, input_layout, **kwargs)


def _check_varlen(query: torch.Tensor, head_num: int, kwargs: dict[str, Any]) -> None:
    """TND: [T, N, D] with N = head_num; the cumulative lengths are host `int[]` in torch_npu's
    signature (a list or tuple of ints, e.g. `cu_seqlens[1:].tolist()`), not device tensors."""
    if query.dim() != 3 or query.shape[1] != head_num:
        raise EmulationError(f"npu_fusion_attention: layout TND needs [T, N, D] with N = head_num {head_num}, "
                             f"got {tuple(query.shape)}")
    for name in ("actual_seq_qlen", "actual_seq_kvlen"):
        lengths = kwargs.get(name)
        if not isinstance(lengths, (list, tuple)) or not all(isinstance(n, int) for n in lengths):
            raise EmulationError(f"npu_fusion_attention: layout TND needs {name} as a list of ints "
                                 f"(the cumulative ends, no leading 0), got {type(lengths).__name__}")


FUSED_OPS = {fn.__name__: fn for fn in (npu_rms_norm, npu_rotary_mul, npu_swiglu, npu_fusion_attention)}


def register(root: types.ModuleType, make_module: Callable[[str, str], types.ModuleType]) -> dict[str, types.ModuleType]:
    """Install the fused operators on the emulated `torch_npu` and return `torch_npu.optim`."""
    for name, fn in FUSED_OPS.items():
        setattr(root, name, fn)
    optim = make_module("torch_npu.optim", "Emulated torch_npu.optim: the fused optimizers (npu-migrate)")
    for cls in OPTIMIZERS:
        setattr(optim, cls.__name__, cls)
    setattr(optim, "__all__", [cls.__name__ for cls in OPTIMIZERS])  # noqa: B010  (a module built at run time)
    setattr(root, "optim", optim)  # noqa: B010
    return {"torch_npu.optim": optim}

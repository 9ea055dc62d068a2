"""Device precision on the CPU: HF32 matmul and convolution, as torch_npu computes them.

HF32 keeps 10 explicit mantissa bits of a float32 (like TF32): torch_npu uses it for convolutions
by default (`torch.npu.conv.allow_hf32 = True`) and for matmuls when
`torch.npu.matmul.allow_hf32 = True`. With `activate(precision="device")`, the float32 inputs of
those aten ops (forward and backward) are rounded to HF32 before the CPU kernel runs, so the run
carries the rounding error a device run carries (the accumulation stays float32).
"""

from __future__ import annotations

import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._state import STATE

_DROPPED_BITS = 13  # float32 has 23 mantissa bits, HF32 keeps 10
aten = torch.ops.aten
MATMUL = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
          aten.addbmm.default, aten.matmul.default, aten.linear.default}
CONV = {aten.convolution.default, aten.convolution_backward.default, aten._convolution.default}


def round_to_hf32(tensor: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest of a float32 tensor to 10 mantissa bits (infinities and NaN kept)."""
    if tensor.dtype != torch.float32:
        return tensor
    bits = tensor.contiguous().view(torch.int32)
    half = 1 << (_DROPPED_BITS - 1)
    rounded = ((bits + half) & ~((1 << _DROPPED_BITS) - 1)).view(torch.float32).view(tensor.shape)
    return torch.where(torch.isfinite(tensor), rounded, tensor)


def round_mantissa(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """Round-to-nearest of a float32 tensor to `bits` explicit mantissa bits (others unchanged)."""
    if tensor.dtype != torch.float32:
        return tensor
    dropped = 23 - bits
    raw = tensor.contiguous().view(torch.int32)
    rounded = ((raw + (1 << (dropped - 1))) & ~((1 << dropped) - 1)).view(torch.float32).view(tensor.shape)
    return torch.where(torch.isfinite(tensor), rounded, tensor)


# a kernel that accumulates in another order than the CPU's is off by about sqrt(K) ulps: the
# verifier's noise run rounds float32 matmul/conv outputs to this many mantissa bits (2^-21 relative)
KERNEL_NOISE_BITS = 20


class DevicePrecision(TorchDispatchMode):
    def __init__(self, kernel_noise: bool = False) -> None:
        super().__init__()
        self.matmul = types.SimpleNamespace(allow_hf32=False)
        self.conv = types.SimpleNamespace(allow_hf32=True)
        self.used: set[str] = set()  # the op classes actually computed in HF32
        self.kernel_noise = kernel_noise

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        hf32 = "matmul" if func in MATMUL and self.matmul.allow_hf32 else \
            "conv" if func in CONV and self.conv.allow_hf32 else None
        if hf32 is not None:
            self.used.add(hf32)
            args = tuple(round_to_hf32(a) if isinstance(a, torch.Tensor) else a for a in args)
        out = func(*args, **kwargs)
        # an op computed in HF32 already carries the device's rounding, which dominates the noise of
        # its accumulation order; the others get that noise
        if self.kernel_noise and hf32 is None and (func in MATMUL or func in CONV):
            if isinstance(out, torch.Tensor):
                return round_mantissa(out, KERNEL_NOISE_BITS)
            if isinstance(out, tuple):
                return tuple(round_mantissa(o, KERNEL_NOISE_BITS) if isinstance(o, torch.Tensor) else o for o in out)
        return out


def install(enabled: bool) -> None:
    """Enter the HF32 mode when `enabled`; it reads the switches torch.npu.matmul / torch.npu.conv
    that the code sets, at every op."""
    if not enabled:
        return
    mode = DevicePrecision()
    mode.matmul, mode.conv = torch.npu.matmul, torch.npu.conv
    mode.__enter__()
    STATE.precision = mode
    STATE.undo.append(lambda: (mode.__exit__(None, None, None), setattr(STATE, "precision", None)))

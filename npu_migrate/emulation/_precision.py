"""Device precision on the CPU: HF32 matmul and convolution, as torch_npu computes them.

HF32 keeps 10 explicit mantissa bits of a float32 (like TF32): torch_npu uses it for convolutions
by default (`torch.npu.conv.allow_hf32 = True`) and for matmuls when
`torch.npu.matmul.allow_hf32 = True`. With `activate(precision="device")`, the float32 inputs of
those aten ops (forward and backward) are rounded to HF32 before the CPU kernel runs, so the run
carries the rounding error a device run carries (the accumulation stays float32).

`torch.npu.matmul.cube_math_type` is read too: `USE_HF32` and `ALLOW_FP32_DOWN_PRECISION` compute
float32 matmuls in HF32 (the lower precision A2/A3 cubes offer for float32), `USE_FP16` rounds their
inputs to float16 (overflow to inf included), `KEEP_DTYPE` (the default) keeps float32.

fp16 accumulation (`fp16_accumulation=True`, off by default: the cube accumulates float16 products
in a float32 buffer): a float16 matmul (`mm`, `bmm`, `addmm`, `baddbmm`, forward and backward) sums
K in blocks of 16, the depth of one cube step, each block's dot product rounded to float16 and
added to a float16 accumulator, as a kernel that accumulates in float16 does. Long reductions then
lose the low bits they lose on such a kernel (a sum of 4096 terms near 1.0 is off by about 1 in
2048), which a float32-accumulating CPU kernel never shows. Convolutions keep float32 accumulation.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._audit import carry_site
from ._state import enter_mode

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


_CUBE_HF32 = {1, 3}  # ALLOW_FP32_DOWN_PRECISION, USE_HF32
_CUBE_FP16 = 2  # USE_FP16
FP16_BLOCK = 16  # K terms one cube step sums before they reach the accumulator
_ACCUMULATING = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default}


def round_to_fp16(tensor: torch.Tensor) -> torch.Tensor:
    """A float32 tensor through float16 and back (what a float16 cube input keeps)."""
    return tensor.half().float() if tensor.dtype == torch.float32 else tensor


def fp16_accumulated_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` of float16 tensors ([..., M, K] @ [..., K, N]) with a float16 accumulator: K in
    blocks of FP16_BLOCK, each block's products summed (exactly enough: in float32) and rounded to
    float16, the blocks added one after another in float16."""
    k = a.shape[-1]
    blocks = -(-k // FP16_BLOCK)
    pad = blocks * FP16_BLOCK - k
    a32, b32 = a.float(), b.float()
    if pad:
        a32 = torch.nn.functional.pad(a32, (0, pad))
        b32 = torch.nn.functional.pad(b32.transpose(-1, -2), (0, pad)).transpose(-1, -2)
    a_blocks = a32.unflatten(-1, (blocks, FP16_BLOCK)).movedim(-2, 0)  # [blocks, ..., M, 16]
    b_blocks = b32.unflatten(-2, (blocks, FP16_BLOCK)).movedim(-3, 0)  # [blocks, ..., 16, N]
    partials = torch.matmul(a_blocks, b_blocks).half()
    total = partials[0]
    for partial in partials[1:]:
        total = total + partial  # float16 + float16: rounded to float16 at every step
    return total


def _fp16_accumulating(func, args, kwargs):  # type: ignore[no-untyped-def]
    """The float16 result of an accumulating op, or None when it is not one on float16 operands."""
    if func in (aten.mm.default, aten.bmm.default):
        a, b = args[0], args[1]
        scale_input, beta, alpha = None, 0, 1
    else:
        scale_input, a, b = args[0], args[1], args[2]
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.dtype == torch.float16 and b.dtype == torch.float16):
        return None
    product = fp16_accumulated_matmul(a, b)
    if scale_input is None:
        return product
    return (beta * scale_input.float() + alpha * product.float()).half() if beta else (alpha * product.float()).half()


# a kernel that accumulates in another order than the CPU's is off by about sqrt(K) ulps: the
# verifier's noise run rounds float32 matmul/conv outputs to this many mantissa bits (2^-21 relative)
KERNEL_NOISE_BITS = 20


class DevicePrecision(TorchDispatchMode):
    def __init__(self, kernel_noise: bool = False, fp16_accumulation: bool = False) -> None:
        super().__init__()
        self.matmul = types.SimpleNamespace(allow_hf32=False, cube_math_type=0)
        self.conv = types.SimpleNamespace(allow_hf32=True)
        self.used: set[str] = set()  # the op classes actually computed in HF32
        self.lowered: set[str] = set()  # "matmul fp16", "fp16 accumulation": what else took effect
        self.kernel_noise = kernel_noise
        self.fp16_accumulation = fp16_accumulation

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cube = getattr(self.matmul, "cube_math_type", 0)
        hf32 = "matmul" if func in MATMUL and (self.matmul.allow_hf32 or cube in _CUBE_HF32) else \
            "conv" if func in CONV and self.conv.allow_hf32 else None
        if hf32 is not None:
            self.used.add(hf32)
            args = tuple(carry_site(a, round_to_hf32(a)) if isinstance(a, torch.Tensor) else a for a in args)
        elif func in MATMUL and cube == _CUBE_FP16:
            self.lowered.add("matmul fp16")
            args = tuple(carry_site(a, round_to_fp16(a)) if isinstance(a, torch.Tensor) else a for a in args)
        if self.fp16_accumulation and func in _ACCUMULATING:
            out = _fp16_accumulating(func, args, kwargs)
            if out is not None:
                self.lowered.add("fp16 accumulation")
                return out
        out = func(*args, **kwargs)
        # an op computed in HF32 already carries the device's rounding, which dominates the noise of
        # its accumulation order; the others get that noise
        if self.kernel_noise and hf32 is None and (func in MATMUL or func in CONV):
            if isinstance(out, torch.Tensor):
                return round_mantissa(out, KERNEL_NOISE_BITS)
            if isinstance(out, tuple):
                return tuple(round_mantissa(o, KERNEL_NOISE_BITS) if isinstance(o, torch.Tensor) else o for o in out)
        return out


def install(enabled: bool, fp16_accumulation: bool = False) -> None:
    """Enter the device-precision mode when `enabled`; it reads the switches torch.npu.matmul /
    torch.npu.conv that the code sets, at every op."""
    if not enabled:
        return
    mode = DevicePrecision(fp16_accumulation=fp16_accumulation)
    npu: Any = sys.modules["torch.npu"]  # the emulated namespace: the switches the code sets
    mode.matmul, mode.conv = npu.matmul, npu.conv
    enter_mode(mode, "precision")

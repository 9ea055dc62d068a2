"""The device's autocast op lists on the CPU.

Under `torch.autocast("npu")` the emulation enables the backing device's autocast (the CPU's), but
the CPU's op lists are not a GPU's or an NPU's: on the CPU, softmax, log_softmax, layer_norm,
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

# upstream autocast_mode.cpp, CUDA: lower_precision_fp ops the CPU list lacks (matmul, mm, bmm,
# addmm, baddbmm, addbmm, linear, conv*, prelu and scaled_dot_product_attention are in both)
LOWER = frozenset({"addmv", "addr", "einsum", "mv", "chain_matmul", "multi_dot", "linalg_multi_dot",
                   "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "linalg_vecdot"})
# CUDA's fp32 and fp32_set_opt_dtype lists, by their Python names (functional, torch.* and Tensor.*)
FLOAT32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus", "layer_norm", "group_norm", "frobenius_norm",
    "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp", "cross_entropy",
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "vector_norm",
    "linalg_matrix_norm", "matrix_norm", "sum", "norm", "rms_norm"})
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
            if name in FLOAT32 and kwargs.get("dtype") is None:
                args, kwargs = self._all(args, kwargs, torch.float32, _LOW)
            elif name in LOWER:
                args, kwargs = self._all(args, kwargs, torch.get_autocast_dtype(self.device_type), (torch.float32,))
        return func(*args, **kwargs)

    @staticmethod
    def _all(args: tuple, kwargs: dict, dtype: torch.dtype, sources: tuple[torch.dtype, ...]) -> tuple[tuple, dict]:
        return (tuple(_cast(a, dtype, sources) for a in args),
                {k: _cast(v, dtype, sources) for k, v in kwargs.items()})


def install(device_type: str) -> DeviceAutocast:
    mode = DeviceAutocast(device_type)
    mode.__enter__()
    return mode

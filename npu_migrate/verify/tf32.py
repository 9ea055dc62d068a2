"""TF32 kept off on a CUDA reference (`--reference cuda`).

An Ampere or later GPU computes float32 convolutions in TF32 by default (cuDNN's `allow_tf32` is
True) and matmuls too when the code asks (`torch.backends.cuda.matmul.allow_tf32 = True`,
`torch.set_float32_matmul_precision("high")`, or `fp32_precision = "tf32"` from torch 2.9 on).
TF32 keeps 10 mantissa bits, the rounding HF32 has on an NPU: a reference computed that way would
hide the very difference the noise run models. So the reference turns TF32 off before the script
starts and keeps it off: the script's own requests are recorded (with the line that made them)
and refused.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

REQUESTS: list[dict[str, Any]] = []
_ALLOWED = (False, "ieee", "none", "highest")  # "none": follow the global setting, kept off


def _caller() -> str | None:
    frame: Any = sys._getframe(2)
    while frame is not None and ("/torch/" in frame.f_code.co_filename or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else None


def _refuse(name: str, value: Any) -> bool:
    """Whether `value` for setting `name` would turn TF32 on (then it is recorded, not applied)."""
    if value in _ALLOWED:
        return False
    REQUESTS.append({"setting": name, "value": str(value), "site": _caller()})
    return True


class _RefusingProperty:
    """Wraps a module-level property (cuDNN's allow_tf32, fp32_precision) so TF32 cannot be set."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def __get__(self, owner: Any, owner_type: Any = None) -> Any:
        return self.inner.__get__(owner, owner_type)

    def __set__(self, owner: Any, value: Any) -> None:
        if not _refuse(self.name, value):
            self.inner.__set__(owner, value)


def keep_off() -> None:
    """Turn TF32 off for CUDA matmuls and convolutions, and refuse the script's requests to turn it on."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    matmul_type = type(torch.backends.cuda.matmul)
    matmul_setattr = matmul_type.__setattr__

    def matmul_set(self: Any, name: str, value: Any) -> None:
        if name in ("allow_tf32", "fp32_precision") and _refuse(f"torch.backends.cuda.matmul.{name}", value):
            return
        matmul_setattr(self, name, value)

    matmul_type.__setattr__ = matmul_set  # type: ignore[method-assign]

    cudnn_type: Any = type(torch.backends.cudnn)
    for name in ("allow_tf32", "fp32_precision"):  # fp32_precision exists from torch 2.9 on
        inner = cudnn_type.__dict__.get(name)
        if inner is not None and hasattr(inner, "__set__"):
            setattr(cudnn_type, name, _RefusingProperty(inner, f"torch.backends.cudnn.{name}"))

    precision_type = getattr(torch.backends, "_FP32Precision", None)  # cudnn.conv / cudnn.rnn, torch 2.9+
    if precision_type is not None:
        precision_setattr = precision_type.__setattr__

        def precision_set(self: Any, name: str, value: Any) -> None:
            if name == "fp32_precision" and _refuse("torch.backends.cudnn.*.fp32_precision", value):
                return
            precision_setattr(self, name, value)

        precision_type.__setattr__ = precision_set

    set_precision = torch.set_float32_matmul_precision

    def set_matmul_precision(precision: str) -> None:
        if not _refuse("torch.set_float32_matmul_precision", precision):
            set_precision(precision)

    torch.set_float32_matmul_precision = set_matmul_precision

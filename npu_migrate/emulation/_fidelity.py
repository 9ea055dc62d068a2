"""Operator fidelity: what the emulated npu runs that an NPU would not run natively, flagged at the
user's line.

- An aten operator with no NPU kernel in torch_npu's kernel list (`npu_migrate.core.kernels`, for
  the running torch's version) and no decomposition torch applies before a backend sees it: on a
  device, torch_npu's PrivateUse1 fallback runs it on the CPU and warns once per operator,
  "CAUTION: The operator 'aten::X' is not currently supported on the NPU backend and will fall back
  to run on the CPU. This may have performance implications."; with TORCH_NPU_FALLBACK_CPU_DISABLE=1
  that is an error. The emulation gives the same warning (or raises the same way), once per
  operator, attributed to the user's file and line.
- float64: the NPU does not compute most operators in float64 (torch_npu's transfer_to_npu turns
  torch.cuda.DoubleTensor into FloatTensor, saying double is not supported). An operator that
  computes on float64 npu tensors is flagged once per operator and line (copies, views and fills,
  which move data without computing, are not).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import torch

from npu_migrate.core.kernels import kernel_overloads

from ._audit import user_site
from ._state import STATE


class NpuFallbackWarning(UserWarning):
    """An operator that torch_npu would run on the CPU (no NPU kernel)."""


class NpuDtypeWarning(UserWarning):
    """An operator computing in a dtype the NPU does not run natively (float64)."""


# data movement and views: no arithmetic in float64, nothing for a kernel to refuse
_NO_COMPUTE = frozenset({"_to_copy", "copy_", "clone", "empty", "empty_like", "empty_strided", "new_empty",
                         "new_empty_strided", "fill_", "zero_", "detach", "alias", "lift_fresh",
                         "_local_scalar_dense", "set_", "resize_", "_copy_from", "_copy_from_and_resize"})


# the CPU kernels the emulation runs in place of an NPU kernel torch_npu has (an npu LSTM runs the
# CPU's mkldnn_rnn_layer where torch_npu runs its lstm.input kernel, attention the CPU's flash
# kernel where torch_npu runs its fused attention): nothing falls back on a device
_STAND_INS = frozenset({"mkldnn_rnn_layer", "mkldnn_rnn_layer_backward", "_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_flash_attention_for_cpu_backward"})


def _overload_name(op: Any) -> str:
    name = op._schema.name.removeprefix("aten::")
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def _structured_out(base: str) -> str | None:
    """The out= overload a structured operator's functional form delegates to: one with a CPU kernel
    of its own and no composite one (generated out= forms of composites have a composite kernel)."""
    packet = getattr(torch.ops.aten, base)
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        if not any(a.is_out for a in schema.arguments):
            continue
        qualified = f"aten::{base}" + ("" if overload == "default" else f".{overload}")
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CPU") and not \
                torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd"):
            return qualified
    return None


def _torch_version() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


class OperatorFidelity:
    def __init__(self) -> None:
        self.kernels, _ = kernel_overloads(_torch_version())
        self.kernel_bases = frozenset(k.split(".")[0] for k in self.kernels)
        # op -> (the operator torch_npu would run on the CPU or None, whether the op computes): one
        # look-up per op overload, made at its first call
        self.facts: dict[Any, tuple[str | None, bool]] = {}
        self.warned_ops: set[str] = set()
        self.warned_double: set[tuple[str, str | None]] = set()
        self.raise_on_fallback = os.environ.get("TORCH_NPU_FALLBACK_CPU_DISABLE", "0") == "1"

    def check(self, op: Any, args: tuple) -> None:
        facts = self.facts.get(op)
        if facts is None:
            facts = self.facts[op] = (self._falls_back(op), self._computes(op))
        missing, computes = facts
        if missing is not None:
            self._fall_back(missing)
        if computes:
            for arg in args:
                if isinstance(arg, torch.Tensor) and arg.dtype is torch.float64:
                    self._double(op)
                    break

    @staticmethod
    def _computes(op: Any) -> bool:
        """Whether `op` does arithmetic (float64 arguments are then flagged): views, copies and fills do not."""
        return _overload_name(op).split(".")[0] not in _NO_COMPUTE and not op.is_view

    def _falls_back(self, op: Any) -> str | None:
        """The operator name torch_npu's fallback would report for `op`, or None when it has a kernel."""
        if getattr(op, "namespace", "aten") != "aten" or op.is_view:
            return None
        name = _overload_name(op)
        base = name.split(".")[0]
        if name in self.kernels or base in _NO_COMPUTE or base in _STAND_INS:
            return None
        qualified = f"aten::{name}"
        # a CompositeExplicitAutograd kernel serves every backend: it decomposes into operators that
        # reach the device (and are checked themselves)
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd"):
            return None
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutogradNonFunctional"):
            # a structured operator's functional form calls its out= form, which needs a backend
            # kernel; any other such composite decomposes on every backend
            delegate = _structured_out(base)
            return None if delegate is None or base in self.kernel_bases else delegate
        return qualified

    def _fall_back(self, schema_name: str) -> None:
        message = (f"CAUTION: The operator '{schema_name}' is not currently supported on the NPU backend and "
                   "will fall back to run on the CPU. This may have performance implications.")
        site = user_site(callers=0)
        if self.raise_on_fallback:
            raise RuntimeError(f"CAUTION: The operator '{schema_name}' is not currently supported on the NPU "
                               f"backend. (TORCH_NPU_FALLBACK_CPU_DISABLE=1; npu-migrate emulation, at {site})")
        if schema_name in self.warned_ops:
            return
        self.warned_ops.add(schema_name)
        _warn_at(site, f"{message} (npu-migrate emulation: no NPU kernel in torch_npu's kernel list)",
                 NpuFallbackWarning)

    def _double(self, op: Any) -> None:
        name = _overload_name(op)
        if _torch_bookkeeping():
            return
        site = user_site(callers=0)
        if (name, site) in self.warned_double:
            return
        self.warned_double.add((name, site))
        _warn_at(site, f"aten::{name} computes in float64 on the npu: the NPU does not run most operators in "
                       "float64 (torch_npu's transfer_to_npu maps torch.cuda.DoubleTensor to FloatTensor: double "
                       "is not supported); use float32 (npu-migrate emulation)", NpuDtypeWarning)


# torch code that computes in float64 by design on any device (GradScaler's reciprocal of the scale,
# printing): not the user's choice of dtype
_BOOKKEEPING = tuple(os.path.join(os.path.dirname(torch.__file__), part) for part in ("amp", "_tensor_str.py"))


def _torch_bookkeeping() -> bool:
    frame: Any = sys._getframe(2)
    own = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and frame.f_code.co_filename.startswith(own):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_BOOKKEEPING)


def _warn_at(site: str | None, message: str, category: type[Warning]) -> None:
    path, _, line = (site or "").rpartition(":")
    if path and line.isdigit():
        warnings.warn_explicit(message, category, path, int(line))
    else:  # no user frame on the stack: autograd's engine runs the backward pass
        warnings.warn_explicit(f"{message} [in a backward pass]", category, "<autograd backward>", 0)


def install() -> None:
    STATE.fidelity = OperatorFidelity()
    STATE.undo.append(lambda: setattr(STATE, "fidelity", None))

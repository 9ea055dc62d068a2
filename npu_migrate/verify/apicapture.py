"""API-level capture (msprobe's level L1) of a script-mode run, so an msprobe dump taken on a device
can be aligned with a reference run by API name.

msprobe's L1 dump names each call of a wrapped API `{Prefix}.{api}.{N}.{forward|backward}`, the
prefix saying through which namespace it was called: `Functional` (torch.nn.functional), `Torch`
(torch), `Tensor` (a tensor method), `NPU` (torch_npu), `VF`, `Aten`, `Distributed`
(docs/en/dump/pytorch_data_dump_instruct.md of Ascend/msprobe, "dump.json Description"). A
`TorchFunctionMode` sees the same top-level calls (a mode is off while its handler runs, so the
calls an API makes inside are not seen, as msprobe's wrappers do not dump them either); each
forward call is recorded with its outputs' statistics and sample and the user's line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .opcapture import OWN_OPS, Record, Sites, _leaves, summarise

_PREFIXES = (("Functional", torch.nn.functional), ("Torch", torch), ("Tensor", torch.Tensor))


def api_base(name: str) -> str:
    """The API without its prefix and call index: "Functional.linear.0.forward" -> "linear",
    "Tensor.__add__" -> "add" (msprobe names operators by their dunder, torch by the method)."""
    parts = name.split(".")
    api = parts[1] if len(parts) > 1 and parts[0][:1].isupper() else parts[0]
    api = api.strip("_")
    return api[1:] if api in ("radd", "rsub", "rmul", "rdiv", "rtruediv", "rpow", "rmatmul") else api


def api_name(func: Any) -> str:
    name = getattr(func, "__name__", str(func))
    for prefix, namespace in _PREFIXES:
        if getattr(namespace, name, None) is func:
            return f"{prefix}.{name}"
    module = getattr(func, "__module__", "") or ""
    if module.startswith("torch_npu"):
        return f"NPU.{name}"
    if "distributed" in module:
        return f"Distributed.{name}"
    return f"Torch.{name}"


class ApiCapture(TorchFunctionMode):
    """Records every top-level torch API call that returns tensors (kind "api")."""

    def __init__(self, record: Record, sites: Sites) -> None:
        super().__init__()
        self.record, self.sites = record, sites
        self.counts: dict[str, int] = {}

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if OWN_OPS.depth:
            return out
        tensors = [t for t in _leaves(out) if isinstance(t, torch.Tensor)]
        if not tensors:
            return out
        name = api_name(func)
        index = self.counts.get(name, 0)
        self.counts[name] = index + 1
        self.record.add({"kind": "api", "name": name, "index": index, "phase": "forward", "site": self.sites.here(),
                         "module": None, "outputs": [summarise(t) for t in tensors]})
        return out

"""The device-generic APIs of portable code (`apply --target portable`) served by the emulated NPU.

torch already takes the renamed PrivateUse1 backend "npu" for the accelerator
(`torch.accelerator.current_accelerator().type == "npu"`), but its generic functions reach the
device through hooks the emulation does not register. These wrappers send them to the emulated
`torch.npu` namespace instead: `torch.accelerator.synchronize()` and the memory statistics,
`torch.get_device_module()`, and `dist.get_default_backend_for_device("npu")`, which answers
"hccl" as torch_npu registers it (the emulation then maps hccl to gloo or nccl).
"""

from __future__ import annotations

from typing import Any

import torch

from ._state import MAPPING, set_attr

# torch.accelerator names answered by the emulated torch.npu function of the same name
_DELEGATED = ("synchronize", "memory_allocated", "max_memory_allocated", "memory_reserved",
              "max_memory_reserved", "empty_cache", "memory_stats", "reset_peak_memory_stats",
              "reset_accumulated_memory_stats")


def _is_npu(device: Any) -> bool:
    if device is None:
        return True  # the current accelerator: the emulated npu
    if isinstance(device, int):
        return True
    return torch.device(device).type == MAPPING["device_type"]


def install_accelerator() -> None:
    npu = torch.npu  # type: ignore[attr-defined]
    for name in _DELEGATED:
        if hasattr(torch.accelerator, name) and hasattr(npu, name):
            set_attr(torch.accelerator, name, getattr(npu, name))
    original_module = torch.get_device_module

    def get_device_module(device: Any = None) -> Any:
        return torch.npu if _is_npu(device) else original_module(device)  # type: ignore[attr-defined]

    set_attr(torch, "get_device_module", get_device_module)
    import torch.distributed as dist

    if not (dist.is_available() and hasattr(dist, "get_default_backend_for_device")):
        return
    original_backend = dist.get_default_backend_for_device

    def get_default_backend_for_device(device: Any) -> str:
        if isinstance(device, (str, torch.device)) and torch.device(device).type == MAPPING["device_type"]:
            return "hccl"  # torch_npu registers hccl for npu; init_process_group maps it
        return original_backend(device)

    set_attr(dist, "get_default_backend_for_device", get_default_backend_for_device)

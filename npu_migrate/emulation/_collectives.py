"""The "hccl" process-group backend of the emulated npu, run by the backing device's backend.

Gloo (and NCCL) read a tensor's memory in C++ and know no "npu" device. torch_npu registers
ProcessGroupHCCL as backend "hccl" for the npu device; the emulation registers, under the same
name (`torch.distributed.Backend.register_backend`), a Python process group whose every
collective hands the backing tensors (`NpuTensor.backing_tensor`, which share their data with the npu
tensors) to a gloo (or, on a CUDA backing, NCCL) backend of its own. So `init_process_group("hccl")`
works as on a device (`dist.get_backend()` is "hccl"), and `all_reduce`, `broadcast`, DDP's
bucketed gradient reductions, ... work in place on npu tensors. Unlike HCCL, host tensors work in
such a group too (torch replaces the whole group by a Python one, for every device).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch.distributed as dist

from ._state import MAPPING, STATE
from ._tensor import NpuTensor

NAME = "hccl"  # the backend's name in torch.distributed, as torch_npu registers it
# the Backend methods that take tensors, forwarded with the tensors unwrapped
_COLLECTIVES = ("allreduce", "allreduce_coalesced", "broadcast", "allgather", "_allgather_base",
                "allgather_coalesced", "allgather_into_tensor_coalesced", "reduce_scatter",
                "_reduce_scatter_base", "reduce_scatter_tensor_coalesced", "reduce", "gather", "scatter",
                "alltoall", "alltoall_base", "send", "recv", "recv_anysource", "barrier")


def _backing(value: Any) -> Any:
    if isinstance(value, NpuTensor):
        return value.backing_tensor
    if isinstance(value, list):
        return [_backing(v) for v in value]
    return value


def _forwarder(name: str) -> Any:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.backing, name)(*(_backing(a) for a in args),
                                           **{k: _backing(v) for k, v in kwargs.items()})

    forward.__name__ = name
    return forward


class NpuProcessGroup(dist.ProcessGroup):
    """A process group for npu tensors that runs every collective on a backing-device backend."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the Python-subclass constructor
        self.backing: Any
        prefixed = dist.PrefixStore("npu_migrate_emulation/", store)
        if MAPPING["dist_backends"][NAME][STATE.backing] == "nccl":
            self.backing = dist.ProcessGroupNCCL(prefixed, rank, size, dist.ProcessGroupNCCL.Options())
        else:
            self.backing = dist.ProcessGroupGloo(prefixed, rank, size, timeout)

    def getBackendName(self) -> str:
        return NAME

    def name(self) -> str:
        return NAME


for _name in _COLLECTIVES:
    setattr(NpuProcessGroup, _name, _forwarder(_name))


_REGISTERED: list[bool] = []


def register() -> None:
    """Once per process (torch keeps registered backends for good)."""
    if _REGISTERED:
        return
    dist.Backend.register_backend(NAME, NpuProcessGroup, devices=["npu", "cpu"])
    _REGISTERED.append(True)

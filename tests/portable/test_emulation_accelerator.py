"""The emulation serves the device-generic APIs that `--target portable` writes: inside it the
current accelerator is `npu`, and the generic calls reach the emulated torch.npu."""

from __future__ import annotations

import torch
import torch.distributed as dist

from npu_migrate.emulation import emulated


def test_portable_apis_answer_as_an_npu() -> None:
    with emulated():
        device = torch.accelerator.current_accelerator() or torch.device("cpu")
        assert device.type == "npu"
        assert torch.accelerator.is_available() and torch.accelerator.device_count() >= 1
        assert torch.get_device_module() is torch.npu
        assert torch.get_device_module("npu:0") is torch.npu
        assert dist.get_default_backend_for_device(device) == "hccl"
        torch.accelerator.synchronize()
        before = torch.accelerator.memory_allocated()
        block = torch.ones(1024, 1024, device=device)  # 4 MiB on the emulated npu
        assert torch.accelerator.memory_allocated() >= before + block.numel() * 4
        assert torch.accelerator.max_memory_allocated() >= torch.accelerator.memory_allocated()
    assert dist.get_default_backend_for_device("cpu") == "gloo"  # restored outside


def test_generic_calls_for_other_devices_are_torch_s_own() -> None:
    with emulated():
        assert torch.get_device_module("cpu") is torch.cpu
        assert dist.get_default_backend_for_device("cpu") == "gloo"

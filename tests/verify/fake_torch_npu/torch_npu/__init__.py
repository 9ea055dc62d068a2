"""A stand-in for the real torch_npu package, for tests only (never the emulation layer).

It registers the backend the way torch_npu documents (torch_npu_api.md §4: rename the PrivateUse1
backend to "npu", register `torch.npu`), runs "npu" tensors on the CPU through its own small
TorchFunctionMode, and reports fixed allocator statistics, so a test can tell that the verifier
took the device path and read the device's own counters.
"""

import sys
import types

import torch
from torch.overrides import TorchFunctionMode

FAKE_PEAK = 123_456_789
FAKE_ALLOCATED = 1_000


class _NpuOnCpu(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}

        def fix(value):
            if isinstance(value, torch.device) and value.type == "npu":
                return torch.device("cpu")
            if isinstance(value, str) and value.split(":")[0] == "npu":
                return "cpu"
            return value

        if func is not torch.device:
            args = tuple(fix(a) for a in args)
            kwargs = {k: fix(v) if k == "device" else v for k, v in kwargs.items()}
        return func(*args, **kwargs)


npu = types.ModuleType("torch_npu.npu")
npu.is_available = lambda: True
npu.device_count = lambda: 1
npu.current_device = lambda: 0
npu.synchronize = lambda device=None: None
npu.reset_peak_memory_stats = lambda device=None: None
npu.memory_allocated = lambda device=None: FAKE_ALLOCATED
npu.max_memory_allocated = lambda device=None: FAKE_PEAK
sys.modules["torch_npu.npu"] = npu

torch.utils.rename_privateuse1_backend("npu")
torch._register_device_module("npu", npu)
torch.Tensor.npu = lambda self, *a, **k: self.to("cpu")
torch.nn.Module.npu = lambda self, *a, **k: self.to("cpu")
_NpuOnCpu().__enter__()
__version__ = "0.0.0+fake"

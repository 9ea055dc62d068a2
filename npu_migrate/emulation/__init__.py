"""Run torch_npu code without an Ascend device.

`activate()` makes `import torch_npu`, `torch.npu.*`, `.npu()`, `"npu"` device strings,
`torch.device("npu", i)`, `torch.autocast("npu")`, `torch.amp.GradScaler("npu")` and the
`hccl` distributed backend work on CPU (or on CUDA with `activate("cuda")`), with memory statistics.
npu tensors are on an emulated device (`_tensor.NpuTensor`): they report `npu:N`, raise on a
CPU/NPU mix as a device does, and warn where torch_npu would fall back to the CPU (`_fidelity`).
A torch_npu custom operator without a reference implementation raises `EmulationError` naming it.

It never activates when the real torch_npu is importable: `activate()` raises `RealTorchNpuError`.
See docs/emulation.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

from ._state import STATE, EmulationError, RealTorchNpuError

__all__ = ["CpuMemoryTracker", "EmulationError", "RealTorchNpuError", "activate", "amp_used", "deactivate",
           "device_precision", "emulated", "hf32_used", "is_active", "memory_tracker", "real_torch_npu_available"]


def __getattr__(name: str) -> Any:
    # the memory tracker's module imports torch: loaded only when a caller asks for it
    if name == "CpuMemoryTracker":
        from ._memory import CpuMemoryTracker

        return CpuMemoryTracker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def real_torch_npu_available() -> bool:
    """True when a torch_npu other than this emulation can be imported."""
    loaded = sys.modules.get("torch_npu")
    if loaded is not None:
        return not getattr(loaded, "__npu_migrate_emulation__", False)
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def device_precision(matmul: bool, conv: bool, autocast_from: str | None = None, kernel_noise: bool = False,
                     fp16_accumulation: bool = False) -> object:
    """Enter HF32 rounding of matmul and/or convolution inputs in this process, without the rest
    of the emulation (the verifier's noise run of the original code); returns the mode.

    `autocast_from="cuda"`: the code's `torch.autocast("cuda")` regions run on the CPU with the
    device's autocast op lists (as the migrated code's regions run on an NPU), instead of
    disabling themselves on a machine without CUDA. `kernel_noise=True`: float32 matmul and
    convolution outputs are rounded to 20 mantissa bits, the size of a device kernel's other
    accumulation order, so that the run shows how that noise grows (an Adam step turns it into
    sign flips of near-zero gradients). `fp16_accumulation=True`: float16 matmuls accumulate in
    float16 (see `_precision`)."""
    import types

    from ._autocast import install as install_autocast
    from ._precision import DevicePrecision

    if autocast_from is not None:
        _autocast_on_cpu(autocast_from)
        install_autocast("cpu")

    mode = DevicePrecision(kernel_noise=kernel_noise, fp16_accumulation=fp16_accumulation)
    mode.matmul = types.SimpleNamespace(allow_hf32=matmul)
    mode.conv = types.SimpleNamespace(allow_hf32=conv)
    mode.__enter__()
    return mode


def _autocast_on_cpu(mapped: str) -> None:
    import torch

    cls = torch.amp.autocast_mode.autocast
    original = cls.__init__

    def init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == mapped:  # CUDA's default autocast dtype is float16
            device_type, dtype = "cpu", torch.float16 if dtype is None else dtype
            STATE.amp_used = STATE.amp_used or bool(enabled)
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    cls.__init__ = init  # type: ignore[method-assign]


def amp_used() -> bool:
    """Whether this process entered an enabled autocast region of the emulated npu (or, in a
    `device_precision(autocast_from=...)` run, of the mapped device)."""
    return bool(STATE.amp_used)


def hf32_used() -> list[str]:
    """The op classes ("conv", "matmul") the active emulation computed in HF32 so far."""
    return sorted(STATE.precision.used) if STATE.precision is not None else []


def memory_tracker() -> object | None:
    """The tracker behind the CPU-backed device's `torch.npu.memory_*` statistics (live bytes of the
    npu tensors' storages, `_memory.CpuMemoryTracker`); None when not tracking."""
    return STATE.memory


def is_active() -> bool:
    return STATE.active


def activate(device: str = "cpu", track_memory: bool = True, audit: bool = False,
             separate_rng: bool = False, precision: str = "exact", fp16_accumulation: bool = False) -> bool:
    """Install the emulation in this process; `device` is the backing device type, "cpu" or "cuda".

    `track_memory=False` skips the CPU allocation tracker behind torch.npu.memory_* (they then
    report 0): it costs a Python call per aten op, and the verifier measures with the profiler.
    npu tensors are on the emulated device: `x.device` is npu:N, ops keep results there and raise
    on a CPU/NPU mix as a device does. `audit=True` also records where host tensors are made, so
    that error names the line of the CPU tensor; `separate_rng=True` gives npu tensors a random
    stream of their own.
    `precision="device"` computes matmul/conv in HF32 where torch_npu does (conv by default,
    matmul when torch.npu.matmul.allow_hf32 is set or torch.npu.matmul.cube_math_type asks for it);
    with `fp16_accumulation=True` float16 matmuls also accumulate in float16 in blocks of 16, for
    kernels that do (the cube itself accumulates in float32). See docs/emulation.md.

    Returns True when it was installed, False when it was already active. Raises RealTorchNpuError
    when the real torch_npu is importable, EmulationError for an unusable backing device.
    """
    if STATE.active:
        return False
    if real_torch_npu_available():
        raise RealTorchNpuError(
            "the real torch_npu is importable; npu-migrate's emulation refuses to shadow it "
            "(run on the device, or remove torch_npu from the environment to emulate)")
    import torch

    if precision not in ("exact", "device"):
        raise EmulationError(f"activate(precision={precision!r}): 'exact' or 'device'")
    if fp16_accumulation and precision != "device":
        raise EmulationError("activate(fp16_accumulation=True) needs precision='device'")
    if device not in ("cpu", "cuda"):
        raise EmulationError(f"activate(device={device!r}): the backing device must be 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise EmulationError("activate(device='cuda'): no CUDA device is available")
    from . import _accelerator, _audit, _devices, _fidelity, _memory, _namespace, _precision

    backend_name = torch._C._get_privateuse1_backend_name()
    if backend_name not in ("privateuseone", "npu"):
        raise EmulationError(f"the PrivateUse1 backend is already named {backend_name!r}; "
                             "cannot register 'npu'")
    if backend_name != "npu":
        torch.utils.rename_privateuse1_backend("npu")  # cannot be undone: torch allows one rename
    STATE.backing, STATE.current_index, STATE.amp_used, STATE.undo = device, 0, False, []
    try:
        _namespace.install_modules()
        _devices.install_device()
        _check_autograd_engine()
        _accelerator.install_accelerator()  # portable code: torch.accelerator & co.
        _audit.install(audit, separate_rng)
        _fidelity.install()
        _precision.install(enabled=precision == "device", fp16_accumulation=fp16_accumulation)
        if device == "cpu" and track_memory:
            _memory.start_cpu_tracker()
    except Exception:
        _undo_all()
        raise
    STATE.active = True
    return True


def _check_autograd_engine() -> None:
    """torch's autograd engine sizes its per-device queues once, at the first backward pass of the
    process: one that ran before the npu was registered has no queue for it, and every backward
    through npu tensors would stop on an internal assert. One tiny backward pass finds it out."""
    import torch

    from ._tensor import NpuTensor

    probe = NpuTensor(torch.ones(1), requires_grad=True)
    try:
        # with the engine's device threads: the activating thread runs its own backward passes
        # (_devices), any other thread and code that turns multithreading back on use them
        with torch.autograd.set_multithreading_enabled(True):
            probe.sum().backward()
    except RuntimeError as error:
        if "device_ready_queues_" not in str(error):
            raise
        raise EmulationError(
            "a backward pass ran in this process before the emulation was activated, so torch's autograd "
            "engine has no queue for the npu device and cannot run backward through npu tensors; activate the "
            "emulation before any backward pass (python -m npu_migrate.emulation SCRIPT does)") from None


def _undo_all() -> None:
    while STATE.undo:
        STATE.undo.pop()()


def deactivate() -> None:
    """Undo activate() as far as torch allows: patches, modules and modes are removed; the
    PrivateUse1 backend keeps the name "npu" (torch permits a single rename per process)."""
    if not STATE.active:
        return
    _undo_all()
    STATE.active = False
    _leave_dormant_backend()


def _leave_dormant_backend() -> None:
    """The backend stays named "npu", so torch now takes it for the accelerator and asks
    `torch.npu.is_available()` (the DataLoader, the profiler): answer "no device", as a machine
    without NPUs would, instead of leaving torch to fail on a missing module."""
    import sys
    import types

    import torch

    if torch._C._get_privateuse1_backend_name() != "npu" or hasattr(torch, "npu"):
        return
    dormant = types.ModuleType("torch.npu", "No NPU: the emulation was deactivated.")
    dormant.is_available = lambda: False  # type: ignore[attr-defined]
    dormant.device_count = lambda: 0  # type: ignore[attr-defined]
    dormant.is_initialized = lambda: False  # type: ignore[attr-defined]
    torch.npu = dormant  # type: ignore[attr-defined]
    sys.modules["torch.npu"] = dormant


@contextlib.contextmanager
def emulated(device: str = "cpu") -> Iterator[None]:
    """`with emulated(): ...` runs the block with the emulation active (if it was not already)."""
    installed = activate(device)
    try:
        yield
    finally:
        if installed:
            deactivate()

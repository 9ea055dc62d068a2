"""Builds the emulated `torch.npu` / `torch_npu.npu` namespace and the `torch_npu` module itself,
following the names of torch_npu.npu.__all__ (torch_npu_api.md §2.1-2.3)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
import time
import types
from typing import Any

import torch

from . import _extras, _memory, fused_ops, ops
from ._state import MAPPING, STATE, EmulationError

_NPU = MAPPING["device_type"]


def _module(name: str, doc: str) -> Any:
    """A module whose names are set one by one below (typed Any: its shape is built at run time)."""
    module: Any = types.ModuleType(name, doc)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, origin="npu-migrate emulation")
    module.__npu_migrate_emulation__ = True
    return module


def _cuda() -> bool:
    return STATE.backing == "cuda"


# ---- device management -------------------------------------------------------------------
def is_available() -> bool:
    return True


def device_count() -> int:
    if _cuda():
        return torch.cuda.device_count()
    # under torchrun each local rank selects its own device; on CPU they all share it
    return max(MAPPING["emulated_device_count"], int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))


def current_device() -> int:
    return STATE.current_index


def set_device(device: Any) -> None:
    index = device if isinstance(device, int) else torch.device(device).index or 0
    if index >= device_count():
        raise EmulationError(f"set_device({device!r}): the emulated npu has {device_count()} device(s)")
    STATE.current_index = index
    if _cuda():
        torch.cuda.set_device(index)


def synchronize(device: Any = None) -> None:
    if _cuda():
        torch.cuda.synchronize()


def get_device_name(device: Any = None) -> str:
    return MAPPING["device_name"]


def get_device_properties(device: Any = None) -> Any:
    total = torch.cuda.get_device_properties(0).total_memory if _cuda() else 64 << 30
    return types.SimpleNamespace(name=MAPPING["device_name"], total_memory=total, L2_cache_size=0,
                                 cube_core_num=0, vector_core_num=0)


def get_device_capability(device: Any = None) -> None:
    return None  # torch_npu returns None unless TORCH_NPU_DEVICE_CAPABILITY is set (§2.6)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    total = get_device_properties().total_memory
    return total - _memory.memory_allocated(), total


def is_bf16_supported() -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [getattr(torch, name) for name in MAPPING["amp_supported_dtypes"]]


class device:
    """Context manager `torch.npu.device(i)` selecting the current device."""

    def __init__(self, device: Any) -> None:
        self.index = device if isinstance(device, int) else torch.device(device).index or 0

    def __enter__(self):
        self.previous = STATE.current_index
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)


# ---- streams and events (CPU executes eagerly: a stream is ordered by construction) ----------
class Stream:
    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device(_NPU, STATE.current_index)
        self.priority = priority

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Stream) -> None:
        pass

    def wait_event(self, event: Event) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return 0


class Event:
    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self.time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        synchronize()
        self.time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        if self.time is None or end_event.time is None:
            raise RuntimeError("elapsed_time: both events must be recorded")
        return (end_event.time - self.time) * 1000.0


def current_stream(device: Any = None) -> Stream:
    return Stream()


default_stream = current_stream


@contextlib.contextmanager
def stream(s: Stream | None):
    yield s


def set_stream(s: Stream) -> None:
    pass


# ---- RNG: the backing device's generator ---------------------------------------------------
def manual_seed(seed: int) -> None:
    if STATE.npu_rng is not None:  # the device's own stream
        STATE.npu_rng.seed(seed)
    elif _cuda():
        torch.cuda.manual_seed(seed)
    else:  # the CPU generator directly: torch.manual_seed itself calls back into this module
        torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed) if not _cuda() else torch.cuda.manual_seed_all(seed)


def _is_in_bad_fork() -> bool:
    return False


def seed() -> None:
    torch.seed()


seed_all = seed


def initial_seed() -> int:
    return torch.initial_seed()


def _rng() -> Any:
    if STATE.npu_rng is not None:
        return STATE.npu_rng.generator
    return torch.cuda if _cuda() else torch.default_generator


def get_rng_state(device: Any = _NPU) -> torch.Tensor:
    return torch.cuda.get_rng_state() if _rng() is torch.cuda else _rng().get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = _NPU) -> None:
    torch.cuda.set_rng_state(new_state) if _rng() is torch.cuda else _rng().set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state()]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    set_rng_state(new_states[0])


# ---- misc torch_npu.npu configuration knobs: accepted, no effect off the device ----------------
def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def empty_cache() -> None:
    if _cuda():
        torch.cuda.empty_cache()


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled(_NPU)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype(_NPU)


def _amp_module(name: str) -> types.ModuleType:
    amp = _module(name, "Emulated torch_npu.npu.amp")
    default_dtype = getattr(torch, MAPPING["amp_default_dtype"])

    class autocast(torch.amp.autocast_mode.autocast):
        def __init__(self, enabled: bool = True, dtype: torch.dtype = default_dtype,
                     cache_enabled: bool = True) -> None:
            super().__init__(_NPU, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(torch.amp.GradScaler):
        def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                     backoff_factor: float = 0.5, growth_interval: int = 2000,
                     dynamic: bool = True, enabled: bool = True) -> None:
            self.dynamic = dynamic
            super().__init__(_NPU, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval,
                             enabled=enabled)

        def update(self, new_scale=None) -> None:
            if self.dynamic or not self.is_enabled() or new_scale is not None:
                return super().update(new_scale)
            scale = self.get_scale()  # a static loss scale: never grows, never backs off
            super().update()
            if self._scale is not None:
                self._scale.fill_(scale)

    def custom_fwd(fwd=None, *, cast_inputs=None):
        return torch.amp.custom_fwd(fwd, device_type=_NPU, cast_inputs=cast_inputs)

    def custom_bwd(bwd=None):
        return torch.amp.custom_bwd(bwd, device_type=_NPU)

    amp.autocast, amp.GradScaler, amp.custom_fwd, amp.custom_bwd = autocast, GradScaler, custom_fwd, custom_bwd
    amp.__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
    return amp


def _mstx_module(name: str) -> types.ModuleType:
    """torch_npu.npu.mstx (§2.6): ranges become profiler record_function ranges."""
    mstx = _module(name, "Emulated torch_npu.npu.mstx")
    open_ranges: dict[int, Any] = {}
    stack: list[Any] = []

    def mark(message: str, stream: Any = None, domain: str = "default") -> None:
        with torch.profiler.record_function(f"mstx::{message}"):
            pass

    def range_start(message: str, stream: Any = None, domain: str = "default") -> int:
        handle = torch.profiler.record_function(f"mstx::{message}")
        handle.__enter__()
        range_id = len(open_ranges) + 1 + max(open_ranges, default=0)
        open_ranges[range_id] = handle
        return range_id

    def range_end(range_id: int, domain: str = "default") -> None:
        handle = open_ranges.pop(range_id, None)
        if handle is not None:
            handle.__exit__(None, None, None)

    def range_push(message: str, domain: str = "default") -> int:
        stack.append(range_start(message))
        return len(stack) - 1

    def range_pop(domain: str = "default") -> int:
        if stack:
            range_end(stack.pop())
        return len(stack)

    @contextlib.contextmanager
    def annotate(message: str, stream: Any = None, domain: str = "default"):
        range_id = range_start(message)
        try:
            yield
        finally:
            range_end(range_id)

    def mstx_range(message: str, stream: Any = None, domain: str = "default"):
        def decorate(func):
            def wrapper(*args, **kwargs):
                with annotate(message):
                    return func(*args, **kwargs)
            return wrapper
        return decorate

    for fn in (mark, range_start, range_end, range_push, range_pop, annotate, mstx_range):
        setattr(mstx, fn.__name__, fn)
    return mstx


def _profiler_module() -> types.ModuleType:
    """A minimal torch_npu.profiler over torch.profiler: NPU activity means the backing device."""
    prof = _module("torch_npu.profiler", "Emulated torch_npu.profiler")
    activity = types.SimpleNamespace(CPU=torch.profiler.ProfilerActivity.CPU,
                                     NPU=torch.profiler.ProfilerActivity.CUDA if _cuda()
                                     else torch.profiler.ProfilerActivity.CPU)

    def profile(*args: Any, activities: Any = None, experimental_config: Any = None, **kwargs: Any):
        acts = sorted(set(activities or [activity.CPU]), key=str)
        return torch.profiler.profile(*args, activities=acts, **kwargs)

    class _ExperimentalConfig:
        def __init__(self, **kwargs: Any) -> None:
            self.__dict__.update(kwargs)

    prof.profile = profile
    prof.ProfilerActivity = activity
    prof.schedule = torch.profiler.schedule
    prof.tensorboard_trace_handler = torch.profiler.tensorboard_trace_handler
    prof.record_function = torch.profiler.record_function
    prof._ExperimentalConfig = _ExperimentalConfig
    prof.ProfilerLevel = types.SimpleNamespace(Level_none="Level_none", Level0="Level0",
                                               Level1="Level1", Level2="Level2")
    prof.AiCMetrics = types.SimpleNamespace(AiCoreNone="AiCoreNone", PipeUtilization="PipeUtilization",
                                            ArithmeticUtilization="ArithmeticUtilization",
                                            Memory="Memory", MemoryL0="MemoryL0",
                                            ResourceConflictRatio="ResourceConflictRatio",
                                            MemoryUB="MemoryUB", L2Cache="L2Cache")
    prof.ExportType = types.SimpleNamespace(Text="text", Db="db")
    prof.ProfilerAction = torch.profiler.ProfilerAction
    prof.supported_activities = lambda: {activity.CPU, activity.NPU}
    return prof


_FUNCTIONS = (is_available, device_count, current_device, set_device, synchronize, get_device_name,
              get_device_properties, get_device_capability, mem_get_info, is_bf16_supported,
              get_amp_supported_dtype, current_stream, stream, set_stream,
              manual_seed, manual_seed_all, seed, initial_seed, get_rng_state,
              set_rng_state, get_rng_state_all, set_rng_state_all, empty_cache, _is_in_bad_fork,
              is_autocast_enabled, get_autocast_dtype)
_MEMORY = ("memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "memory_stats",
           "memory_summary", "_record_memory_history", "_snapshot", "_dump_snapshot")
_NOOPS = ("init", "set_option", "set_compile_mode", "set_aoe", "ipc_collect", "set_sync_debug_mode",
          "set_mm_bmm_format_nd", "set_deterministic_level", "set_dump", "init_dump", "finalize_dump",
          "clear_npu_overflow_flag", "set_per_process_memory_fraction", "reset_accumulated_memory_stats",
          "set_device_limit", "set_stream_limit", "reset_stream_limit", "use_compatible_impl")


def build_modules() -> dict[str, types.ModuleType]:
    """All emulated modules, keyed by their sys.modules name."""
    npu = _module("torch_npu.npu", "Emulated torch_npu.npu (npu-migrate)")
    for fn in _FUNCTIONS:
        setattr(npu, fn.__name__, fn)
    # aliases set by name: setattr(fn.__name__) would file them under the original's name
    npu.default_stream, npu.seed_all = default_stream, seed_all
    npu.device, npu.Stream, npu.Event = device, Stream, Event
    npu.StreamContext = stream
    npu.is_initialized = lambda: True
    memory = _module("torch_npu.npu.memory", "Emulated torch_npu.npu.memory")
    for name in _MEMORY:
        setattr(npu, name, getattr(_memory, name))
        setattr(memory, name, getattr(_memory, name))
    npu.max_memory_reserved, npu.memory_reserved = _memory.max_memory_allocated, _memory.memory_allocated
    npu.reset_max_memory_allocated = npu.reset_max_memory_cached = _memory.reset_peak_memory_stats
    memory.memory_allocated = _memory.memory_allocated
    for name in _NOOPS:
        setattr(npu, name, _noop)
    npu.matmul = types.SimpleNamespace(allow_hf32=False, cube_math_type=0)
    npu.conv = types.SimpleNamespace(allow_hf32=True)
    npu.config = types.SimpleNamespace(allow_internal_format=False)
    npu.amp = _amp_module("torch_npu.npu.amp")
    npu.mstx = _mstx_module("torch_npu.npu.mstx")
    npu.memory = memory
    rng = {fn.__name__: fn for fn in (manual_seed, manual_seed_all, seed, initial_seed, get_rng_state,
                                      set_rng_state, get_rng_state_all, set_rng_state_all)}
    rng["seed_all"] = seed_all
    submodules = _extras.populate(npu, memory, _module, Stream, rng)
    npu.__all__ = sorted(n for n in vars(npu) if not n.startswith("_") and n not in ("amp", "memory", "mstx", *(m.rpartition(".")[2] for m in submodules)))

    root = _module("torch_npu", "Emulated torch_npu (npu-migrate): runs NPU code on "
                               f"{STATE.backing}. Not the real package.")
    root.__version__ = "0.0.0+npu_migrate.emulation"
    root.__path__ = []  # a package, so `import torch_npu.npu` resolves through sys.modules
    root.npu = npu
    root.profiler = _profiler_module()
    for name, op in ops.REFERENCE_OPS.items():
        setattr(root, name, op)
    tuned = fused_ops.register(root, _module)  # torch_npu.optim and the fused operators (NPU600-NPU613)
    root.__getattr__ = _unknown_attribute
    return {"torch_npu": root, "torch_npu.npu": npu, "torch_npu.npu.amp": npu.amp,
            "torch_npu.npu.memory": memory, "torch_npu.npu.mstx": npu.mstx,
            "torch_npu.profiler": root.profiler, **submodules, **tuned}


def _unknown_attribute(name: str) -> Any:
    # npu_* and a few other names are torch_npu custom operators: importable, failing on call
    if name.startswith("npu_") or name == "one_":
        return ops.UnemulatedOp(name)
    raise AttributeError(f"module 'torch_npu' (npu-migrate emulation) has no attribute {name!r}")


def install_modules() -> None:
    modules = build_modules()
    aliases = ["torch" + name.removeprefix("torch_npu") for name in modules if name.startswith("torch_npu.npu")]
    previous = {name: sys.modules.get(name) for name in list(modules) + aliases}
    sys.modules.update(modules)
    sys.modules["torch.npu"] = modules["torch_npu.npu"]
    sys.modules["torch.npu.amp"] = modules["torch_npu.npu.amp"]
    for name, module in modules.items():  # torch.npu.X is torch_npu.npu.X, as torch_npu does
        if name.startswith("torch_npu.npu."):
            sys.modules["torch" + name.removeprefix("torch_npu")] = module
    from ._state import set_attr

    set_attr(torch, "npu", modules["torch_npu.npu"])

    def restore() -> None:
        for name, module in previous.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    STATE.undo.append(restore)

"""The rest of torch_npu.npu.__all__ that `apply` can emit (codemods/data/*.json): typed tensors and
storages, graphs, allocator and host-memory knobs, device limits, overflow flags.

Each name does what it can do off the device: a typed tensor is a tensor of that dtype, a graph
records the aten ops of its capture and replays them on the same tensors, a knob is accepted. A
feature with no CPU meaning (model obfuscation) raises EmulationError naming itself when called.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _memory
from ._state import EmulationError

_TYPED = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
          "BFloat16": torch.bfloat16, "Long": torch.int64, "Int": torch.int32, "Short": torch.int16,
          "Char": torch.int8, "Byte": torch.uint8, "Bool": torch.bool}


def _typed_tensor(prefix: str, dtype: torch.dtype) -> Callable[..., torch.Tensor]:
    def make(*args: Any) -> torch.Tensor:
        if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Tensor)):
            data = torch.as_tensor(args[0], dtype=dtype)
        else:  # sizes, as torch.cuda.FloatTensor(2, 3)
            data = torch.empty(*args, dtype=dtype)
        return data.to("npu")

    make.__name__ = make.__qualname__ = f"{prefix}Tensor"
    return make


def _typed_storage(prefix: str, dtype: torch.dtype) -> Callable[..., Any]:
    def make(*args: Any) -> Any:
        return torch.TypedStorage(*args, dtype=dtype)

    make.__name__ = make.__qualname__ = f"{prefix}Storage"
    return make


class _OpRecorder(TorchDispatchMode):
    """Records the aten ops run during a graph capture, with the tensors they produced."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


class NPUGraph:
    """torch.npu.NPUGraph off the device: capture runs the work once and records its aten ops;
    replay() runs them again on the same tensors and writes the results into the captured
    outputs, so static-input / static-output code sees what a replay on the device gives."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._ops: list[tuple[Any, tuple, dict, Any]] = []
        self._recorder: _OpRecorder | None = None

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        self._recorder = _OpRecorder()
        self._recorder.__enter__()

    def capture_end(self) -> None:
        if self._recorder is not None:
            self._recorder.__exit__(None, None, None)
            self._ops, self._recorder = self._recorder.ops, None

    def replay(self) -> None:
        with torch.no_grad():
            for func, args, kwargs, captured in self._ops:
                fresh = func(*args, **kwargs)
                if isinstance(captured, torch.Tensor) and isinstance(fresh, torch.Tensor) \
                        and fresh is not captured and fresh.shape == captured.shape:
                    captured.copy_(fresh)

    def reset(self) -> None:
        self._ops = []

    def pool(self) -> int:
        return 0

    def debug_dump(self, path: str) -> None:
        return None

    def enable_debug_mode(self) -> None:
        return None


class graph:
    def __init__(self, npu_graph: NPUGraph, pool: Any = None, stream: Any = None,
                 capture_error_mode: str = "global") -> None:
        self.npu_graph = npu_graph

    def __enter__(self) -> None:
        self.npu_graph.capture_begin()

    def __exit__(self, *exc: object) -> None:
        self.npu_graph.capture_end()


def make_graphed_callables(callables: Any, sample_args: Any, *args: Any, **kwargs: Any) -> Any:
    return callables  # a graphed callable computes what the callable computes


class MemPool:
    def __init__(self, allocator: Any = None) -> None:
        self.allocator = allocator

    @property
    def id(self) -> tuple[int, int]:
        return (0, 0)

    def snapshot(self) -> list[Any]:
        return []

    def use_count(self) -> int:
        return 1


class NPUPluggableAllocator:
    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str) -> None:
        self.path = path_to_so_file


_ALLOCATIONS: dict[int, torch.Tensor] = {}


def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    block = torch.empty(int(size), dtype=torch.uint8)
    _ALLOCATIONS[block.data_ptr()] = block
    return block.data_ptr()


def caching_allocator_delete(mem_ptr: int) -> None:
    _ALLOCATIONS.pop(mem_ptr, None)


def _unsupported(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise EmulationError(f"torch.npu.{name} has no meaning off an Ascend device; "
                             "npu-migrate's emulation cannot run it")

    call.__name__ = name
    return call


def _constant(name: str, value: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return value() if callable(value) else value

    call.__name__ = name
    return call


@contextlib.contextmanager
def device_of(tensor: Any):
    yield


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: Any = None):
    yield


def _host_stats() -> dict[str, Any]:
    return {"allocated_bytes.all.current": 0, "allocated_bytes.all.peak": 0}


def _nested(stats: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in stats.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _memory_snapshot() -> list[dict[str, Any]]:
    return _memory._snapshot().get("segments", [])


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("npu", enabled)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype("npu", dtype)


_FUNCTIONS = (caching_allocator_alloc, caching_allocator_delete, device_of, use_mem_pool,
              make_graphed_callables, set_autocast_enabled, set_autocast_dtype)
_CONSTANTS: dict[str, Any] = {
    "can_device_access_peer": True, "check_uce_in_memory": 0, "get_npu_overflow_flag": False,
    "current_blas_handle": 0, "utilization": 0, "get_device_limit": lambda: {"cube_core_num": 0,
                                                                               "vector_core_num": 0},
    "get_stream_limit": lambda: {"cube_core_num": 0, "vector_core_num": 0},
    "get_sync_debug_mode": 0, "get_mm_bmm_format_nd": False, "get_per_process_memory_fraction": 1.0,
    "get_allocator_backend": "native", "is_current_stream_capturing": False,
    "is_jit_compile_false": True, "are_compatible_impl_enabled": False, "stress_detect": 0,
    "graph_pool_handle": (0, 0), "host_memory_stats": _host_stats,
    "host_memory_stats_as_nested_dict": lambda: _nested(_host_stats()),
    "memory_stats_as_nested_dict": lambda: _nested(_memory.memory_stats()),
    "memory_snapshot": _memory_snapshot, "memory_cached": _memory.memory_allocated,
    "max_memory_cached": _memory.max_memory_allocated,
}
_NOOPS = ("stop_device", "restart_device", "set_op_timeout_ms", "empty_virt_addr_cache",
          "enable_deterministic_with_backward", "disable_deterministic_with_backward",
          "host_empty_cache", "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
          "change_current_allocator", "register_npu_graph_handler", "graph_task_group_begin",
          "graph_task_group_end", "graph_task_update_begin", "graph_task_update_end",
          "super_kernel_scope_begin", "super_kernel_scope_end", "_save_memory_usage",
          "_save_segment_usage", "_set_allocator_settings")
_UNSUPPORTED = ("obfuscation_initialize", "obfuscation_calculate", "obfuscation_finalize")


def populate(npu: Any, memory: Any, make_module: Callable[..., Any],
             stream_cls: type, rng_functions: dict[str, Callable[..., Any]]) -> dict[str, types.ModuleType]:
    """Adds the names above to the emulated torch.npu (and torch.npu.memory); returns the new
    submodules keyed by their torch_npu.npu.* name."""
    for prefix, dtype in _TYPED.items():
        setattr(npu, f"{prefix}Tensor", _typed_tensor(prefix, dtype))
        setattr(npu, f"{prefix}Storage", _typed_storage(prefix, dtype))
    for fn in _FUNCTIONS:
        setattr(npu, fn.__name__, fn)
    for name, value in _CONSTANTS.items():
        setattr(npu, name, _constant(name, value))
    for name in _NOOPS:
        setattr(npu, name, _constant(name, None))
    for name in _UNSUPPORTED:
        setattr(npu, name, _unsupported(name))
    npu.NPUGraph, npu.graph, npu.MemPool, npu.NPUPluggableAllocator = NPUGraph, graph, MemPool, NPUPluggableAllocator
    npu.NpuGraphOpHandler = type("NpuGraphOpHandler", (), {})
    npu.CubeMathType = types.SimpleNamespace(KEEP_DTYPE=0, ALLOW_FP32_DOWN_PRECISION=1,
                                             USE_FP16=2, USE_HF32=3, USE_FP32_ADD=4)
    npu.ExternalStream = npu.SyncLaunchStream = stream_cls
    npu.ExternalEvent = npu.Event
    npu.default_generators = ()
    npu.npurt = make_module("torch_npu.npu.npurt", "Emulated torch_npu.npu.npurt (runtime handles)")
    npu.backends = types.SimpleNamespace(fft_plan_cache=types.SimpleNamespace(
        max_size=0, size=0, clear=lambda: None))
    for name in ("memory_cached", "max_memory_cached", "memory_reserved", "max_memory_reserved",
                 "memory_snapshot", "memory_stats_as_nested_dict", "host_memory_stats",
                 "host_memory_stats_as_nested_dict", "caching_allocator_alloc", "caching_allocator_delete",
                 "empty_cache", "get_per_process_memory_fraction", "set_per_process_memory_fraction",
                 "reset_max_memory_allocated", "reset_max_memory_cached", "reset_accumulated_memory_stats",
                 "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats", "MemPool",
                 "NPUPluggableAllocator", "use_mem_pool", "change_current_allocator",
                 "get_allocator_backend", "_save_memory_usage", "_save_segment_usage",
                 "_set_allocator_settings"):
        setattr(memory, name, getattr(npu, name))
    graphs = make_module("torch_npu.npu.graphs", "Emulated torch_npu.npu.graphs")
    for name in ("NPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
                 "make_graphed_callables"):
        setattr(graphs, name, getattr(npu, name))
    streams = make_module("torch_npu.npu.streams", "Emulated torch_npu.npu.streams")
    streams.Stream, streams.Event = npu.Stream, npu.Event
    streams.ExternalStream, streams.SyncLaunchStream = stream_cls, stream_cls
    random = make_module("torch_npu.npu.random", "Emulated torch_npu.npu.random")
    for name, fn in rng_functions.items():
        setattr(random, name, fn)
    npu.graphs, npu.streams, npu.random = graphs, streams, random
    return {"torch_npu.npu.graphs": graphs, "torch_npu.npu.streams": streams,
            "torch_npu.npu.random": random, "torch_npu.npu.npurt": npu.npurt}

"""One side of a script-mode verification, in its own process:
`python -m npu_migrate.verify.script_runner JOB.json`.

The job names the side ("reference", "noise" or "target"), the tree, the script and its arguments,
the steps, and where to save the record. The script runs unmodified as `__main__` with the tree as
working directory, under OpCapture; nothing is injected into it: it builds, seeds, places and
trains by itself.

- reference: the original code on the CPU ("cuda" mapped to the CPU when there is no GPU), float32;
- noise: the same, with the device's precision (HF32 matmul and convolution inputs): how far an
  honest device run may drift from the reference, op by op;
- target: the migrated code on an Ascend device, or the emulation with the placement audit.
"""

from __future__ import annotations

import json
import os
import random
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import torch

from npu_migrate.emulation import CpuMemoryTracker

from .apicapture import ApiCapture
from .opcapture import (
    ModuleTracker,
    MoveWatcher,
    OpCapture,
    PrintTee,
    Record,
    SeedWatcher,
    Sites,
    StepCounter,
    StopRun,
)
from . import tf32
from .runner import _install_cuda_shim, describe_error, load_torch_npu
from .statecapture import (
    HookWatcher,
    Instances,
    ModeWatcher,
    RegionWatcher,
    SaveWatcher,
    final_state,
)


def _kernels_as_on_a_gpu() -> None:
    """The CPU reference takes the paths a GPU (and an NPU) takes where the CPU has kernels of its
    own, so both sides run the same ops in the same order, with the same temporaries."""
    _foreach_as_on_a_gpu()
    _dropout_as_on_a_gpu()


def _foreach_as_on_a_gpu() -> None:
    """Optimizers and clip_grad_norm_ use foreach kernels on a GPU (and on an NPU) but loop per
    tensor on the CPU: let the CPU reference take the GPU's path, so both sides run the same ops in
    the same order (the CPU has the foreach kernels too)."""
    import torch.optim.optimizer as optimizer_module
    import torch.utils._foreach_utils as foreach_utils

    original = foreach_utils._get_foreach_kernels_supported_devices

    def supported() -> list[str]:
        return [*original(), "cpu"]

    foreach_utils._get_foreach_kernels_supported_devices = supported
    if hasattr(optimizer_module, "_get_foreach_kernels_supported_devices"):
        optimizer_module._get_foreach_kernels_supported_devices = supported


def _dropout_as_on_a_gpu() -> None:
    """In training, dropout on a GPU or an NPU is one fused kernel, `native_dropout`, whose mask is
    bool; the CPU draws a float mask and scales in three ops (bernoulli_, div_, mul), a mask four
    times the size. The CPU has `native_dropout` too: the same draws, so the same numbers, and the
    device's ops and peak memory. (In-place dropout takes the three ops on every device.)"""
    import torch.nn.functional as functional

    original = functional.dropout

    def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        if training and not inplace and 0.0 < p < 1.0 and input.numel() > 0:
            return torch.native_dropout(input, p, True)[0]
        return original(input, p, training, inplace)

    functional.dropout = dropout


def _data_in_process() -> None:
    """DataLoader workers run in the main process (num_workers=0) on both sides: the dataset's ops
    (normalisation, augmentation) are then captured at their lines, not hidden in a worker. The
    batches are the same; the sampler's order comes from the main process either way."""
    from torch.utils.data import DataLoader

    original = DataLoader.__init__

    def init(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > 5:  # num_workers is the 6th positional parameter
            args = (*args[:5], 0, *args[6:])
        kwargs.update({"num_workers": 0} if len(args) <= 5 else {})
        kwargs.pop("persistent_workers", None)
        kwargs.pop("prefetch_factor", None)
        original(self, *args, **kwargs)

    DataLoader.__init__ = init  # type: ignore[method-assign]


def _setup(job: dict[str, Any]) -> str:
    """Prepare this process's device side; returns the backend name."""
    side = job["side"]
    if side in ("reference", "noise") and job.get("portable"):
        backend = "cpu (plain torch, the code's own CPU path)"
    elif side in ("reference", "noise"):
        if job.get("reference") == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("--reference cuda: no CUDA device is available")
            tf32.keep_off()
            backend = "cuda (TF32 off)"
        else:
            if not torch.cuda.is_available():
                _install_cuda_shim()
                # the original runs as on its GPU: `if torch.cuda.is_available()` takes the GPU path
                torch.cuda.is_available = lambda: True
                torch.cuda.device_count = lambda: 1
                _kernels_as_on_a_gpu()
            backend = "cpu"
    if side in ("reference", "noise") and job.get("portable"):
        _kernels_as_on_a_gpu()  # the same optimizer and dropout kernels as on the device
    if side == "noise":
        from npu_migrate.emulation import device_precision

        classes = job.get("hf32", ["matmul", "conv"])
        device_precision(matmul="matmul" in classes, conv="conv" in classes, autocast_from="cuda",
                         kernel_noise=True, fp16_accumulation=bool(job.get("fp16_accumulation")))
        backend += f" + HF32 {'/'.join(sorted(classes)) or 'nothing'} + kernel noise (matmul/conv outputs at 2^-21)"
    if side in ("reference", "noise"):
        return backend
    if job.get("target_device") == "cuda":  # portable code on a GPU: it picks the device itself
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda: no CUDA device is available")
        return "cuda"
    from npu_migrate import emulation

    if emulation.real_torch_npu_available():
        npu = load_torch_npu()
        if not (npu.is_available() and npu.device_count() > 0):
            raise RuntimeError("torch_npu is installed but no NPU device is available; the emulation "
                               "never shadows a real torch_npu")
        return "torch_npu"
    precision = "device" if job.get("device_precision") else "exact"
    fp16_accumulation = precision == "device" and bool(job.get("fp16_accumulation"))
    # the device's memory statistics (live npu storages on a CPU backing) are the migrated side's peak
    emulation.activate(job.get("backing", "cpu"), track_memory=bool(job.get("memory", True)), audit=True,
                       separate_rng=job.get("rng") == "device", precision=precision,
                       fp16_accumulation=fp16_accumulation)
    # tensors the script keeps on the CPU (a script whose --device defaults to cpu) take the
    # kernels the reference's CPU takes (foreach optimizers, fused dropout); npu tensors take them anyway
    _kernels_as_on_a_gpu()
    accumulation = ", fp16 accumulation" if fp16_accumulation else ""
    return f"emulation ({job.get('backing', 'cpu')}, {precision} precision{accumulation}, rng {job.get('rng', 'align')})"


def run(job: dict[str, Any]) -> dict[str, Any]:
    root = Path(job["root"]).resolve()
    script = root / job["script"]
    record = Record()
    result: dict[str, Any] = {"side": job["side"], "backend": None, "error": None, "completed": False,
                              "record": record.events, "timing": {}}
    try:
        result["backend"] = _setup(job)
    except Exception as error:  # reported to the parent
        result["error"] = {"type": type(error).__name__, "message": str(error), "phase": "setup",
                           "location": None}
        return result
    _data_in_process()
    sites = Sites(str(root))
    instances = Instances()
    modules = ModuleTracker(sites, on_model=instances.model_called)
    modules.install()
    instances.install()
    StepCounter(record, sites, int(job["steps"])).install()
    seed = job.get("seed")
    if seed is not None:  # a default for scripts that do not seed; the script's own seeds win
        random.seed(seed)
        torch.manual_seed(seed)
    for watcher in (SeedWatcher, MoveWatcher, ModeWatcher, RegionWatcher, HookWatcher, SaveWatcher):
        watcher(record, sites).install()
    memory = _memory_meter(job, result["backend"] or "")
    os.chdir(root)
    # the script's folder first, as `python train.py` has it; then the tree's root, as an installed
    # (`pip install -e .`) project has it, so `from mypackage import ...` finds this tree's copy
    sys.path[:0] = [str(script.parent)] + ([str(root)] if script.parent != root else [])
    sys.argv = [str(script), *job.get("args", [])]
    stdout = sys.stdout
    sys.stdout = PrintTee(record, sites, echo=None)
    started = time.perf_counter()
    try:
        capture = ApiCapture(record, sites) if job.get("api_level") else \
            OpCapture(record, sites, modules, memory if isinstance(memory, CpuMemoryTracker) else None)
        if isinstance(memory, CpuMemoryTracker) and isinstance(capture, OpCapture):
            memory.site_of = capture.site  # what the emulated device makes, at the user's line
        with capture:
            runpy.run_path(str(script), run_name="__main__")
        result["completed"] = True
    except StopRun:
        result["completed"] = True
    except SystemExit as exit_:
        result["completed"] = exit_.code in (0, None)
        if not result["completed"]:
            result["error"] = {"type": "SystemExit", "message": f"the script exited with {exit_.code}",
                               "phase": "script", "location": None}
    except BaseException as error:  # the migrated code may raise anything
        result["error"] = describe_error(error, root, "script", None)
    finally:
        sys.stdout = stdout
    result["timing"]["script_s"] = time.perf_counter() - started
    final_state(record, instances)
    result["memory"] = _memory_result(memory)
    result["steps_run"] = record.step + 1
    result["hf32_used"] = _hf32_used(result.get("backend") or "")
    result["truncated"] = record.truncated
    result["amp_used"] = _amp_used(job["side"])
    result["tf32_refused"] = list(tf32.REQUESTS)
    return result


def _memory_meter(job: dict[str, Any], backend: str) -> Any:
    """What measures this side's peak memory: the device allocator's statistics on a device or a
    CUDA-backed emulation (the module exposing them); on the CPU, live tensor storages: on the
    reference every storage the ops produce (its CPU is the device and the host at once), under the
    emulation the same plus every npu storage the device makes (its own memory statistics, which
    also see tensors no captured op returns); None with --no-memory."""
    if not job.get("memory", True):
        return None
    if backend.startswith("emulation"):
        from npu_migrate.emulation import memory_tracker

        tracker = memory_tracker()
        if tracker is not None:
            return tracker
    device = vars(torch)["npu"] if backend == "torch_npu" or backend.startswith("emulation") else \
        torch.cuda if backend == "cuda" else None
    if device is not None:
        device.reset_peak_memory_stats()
        return device
    return CpuMemoryTracker()


def _memory_result(meter: Any) -> dict[str, Any] | None:
    if meter is None:
        return None
    if isinstance(meter, CpuMemoryTracker):
        top = dict(sorted(meter.at_peak.items(), key=lambda item: -item[1])[:50])
        return {"peak": meter.peak, "end": meter.allocated, "by_site": top, "method": "live tensor storages (CPU)"}
    return {"peak": int(meter.max_memory_allocated()), "end": int(meter.memory_allocated()), "by_site": {},
            "method": "device allocator statistics"}


def _hf32_used(backend: str) -> list[str] | None:
    """The op classes this side computed in HF32: what the emulation did; None on a real device
    (its kernels decide) and [] where nothing was rounded."""
    if backend == "torch_npu":
        return None
    from npu_migrate.emulation import hf32_used

    return hf32_used()


def _amp_used(side: str) -> bool:
    """Whether the code entered an enabled autocast region of the device (the noise run: of the
    original's "cuda", run with the device's autocast lists; the target: of the npu)."""
    from npu_migrate.emulation import amp_used

    return amp_used() if side != "reference" else False


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    result = run(job)
    torch.save(result, job["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

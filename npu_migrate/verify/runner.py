"""One side of a verification, in its own process: `python -m npu_migrate.verify.runner JOBS.json`.

The job file names the side ("reference" or "target"), its device settings and a list of jobs
(tree root, entry, steps, seed, output file). Each job builds the model through the entry point,
measures peak memory over the training steps, restores the initial state, then repeats the steps
with forward hooks and saves every recorded tensor with torch.save for the parent to compare.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import random
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any, TypeVar

import torch

from . import peak
from .capture import Recorder, module_locations, to_cpu_copy
from .entry import (
    BuildSpec,
    call_build,
    compute_loss,
    flatten,
    load_build,
    map_tensors,
    run_forward,
)


_Value = TypeVar("_Value")


class SideError(Exception):
    """The side cannot run at all (e.g. torch_npu installed without a device)."""


def load_torch_npu() -> Any:
    """Import the real torch_npu (it registers the NPU backend) and return `torch.npu`, the
    module it adds to torch at run time (so not an attribute torch's type stubs know)."""
    importlib.import_module("torch_npu")
    return vars(torch)["npu"]


class Side:
    """Device, backend name and allocator-statistics module of this process's side."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.name = config["side"]
        self.amp_used = False
        self.stats: Any = None  # torch.cuda or torch.npu: the allocator statistics, None on the CPU
        if self.name == "reference":
            self._reference(config.get("reference", "cpu"))
        else:
            self._target(config.get("backing", "cpu"))

    def _reference(self, device: str) -> None:
        if device == "cuda":
            if not torch.cuda.is_available():
                raise SideError("--reference cuda: no CUDA device is available")
            from .tf32 import keep_off

            keep_off()
            self.device, self.backend, self.stats = "cuda", "cuda (TF32 off)", torch.cuda
            return
        self.device, self.backend, self.stats = "cpu", "cpu", None
        if not torch.cuda.is_available():
            _install_cuda_shim()

    def _target(self, backing: str) -> None:
        from npu_migrate import emulation

        if emulation.real_torch_npu_available():
            npu = load_torch_npu()
            if not (npu.is_available() and npu.device_count() > 0):
                raise SideError("torch_npu is installed but no NPU device is available; the emulation "
                                "never shadows a real torch_npu, so nothing can run the migrated side")
            self.device, self.backend, self.stats = "npu", "torch_npu", npu
        else:
            emulation.activate(backing, track_memory=False)  # peak comes from the profiler
            self.device, self.backend = "npu", f"emulation ({backing})"
            self.stats = torch.cuda if backing == "cuda" else None
        self._watch_autocast()

    def _watch_autocast(self) -> None:
        cls = torch.amp.autocast_mode.autocast
        original = cls.__init__
        side = self

        def init(self, device_type, *args, **kwargs):
            if device_type == "npu" and kwargs.get("enabled", args[1] if len(args) > 1 else True):
                side.amp_used = True
            original(self, device_type, *args, **kwargs)

        cls.__init__ = init  # type: ignore[method-assign]


class _CpuStream:
    """The stream the CPU reference reports for the original's "cuda": nothing is ever captured."""

    def is_capturing(self) -> bool:
        return False

    def synchronize(self) -> None:
        pass


_CPU_STREAM = _CpuStream()


def _install_cuda_shim() -> None:
    """The original code may say "cuda"; on a CPU-only reference those places mean the CPU."""
    from npu_migrate.emulation._devices import DeviceMapMode

    DeviceMapMode({"cuda": "cpu"}).__enter__()
    torch.Tensor.cuda = lambda self, device=None, non_blocking=False, **kw: self.to("cpu")  # type: ignore[method-assign]
    torch.nn.Module.cuda = lambda self, device=None: self.to("cpu")  # type: ignore[method-assign]
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.set_device = lambda device: None
    torch.cuda.current_device = lambda: 0
    # the GPU the original was written for has bf16 (an A100 or later); the NPU has it too
    torch.cuda.is_bf16_supported = lambda *args, **kwargs: True
    if torch.backends.cuda.is_built():
        # a CUDA build of torch without a GPU: once torch.cuda.is_available() says yes, optimizers
        # ask the accelerator's current stream whether a CUDA graph is being captured, which would
        # reach for the missing driver; on the CPU nothing is captured
        torch.cuda.is_current_stream_capturing = lambda: False
        torch.accelerator.current_stream = lambda device=None: _CPU_STREAM  # type: ignore[assignment,return-value]
    # pinned host memory needs an accelerator; on the CPU reference it is the memory itself
    torch.Tensor.pin_memory = lambda self, device=None: self  # type: ignore[method-assign,assignment,return-value]
    # a CUDA build of torch on a machine without a GPU would name CUDA as its accelerator, and
    # torch.accelerator.is_available() reads torch.cuda.is_available (True above): the optimizers'
    # graph-capture check would then initialise CUDA. The CPU reference has no accelerator, as in
    # a CPU build of torch
    torch.accelerator.current_accelerator = lambda check_available=False: None
    torch.accelerator.is_available = lambda: False


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)


def describe_error(error: BaseException, root: Path, phase: str, module: str | None) -> dict[str, Any]:
    frames = traceback.extract_tb(error.__traceback__)
    location = None
    for frame in reversed(frames):  # innermost frame inside the user's tree
        path = os.path.abspath(frame.filename)
        if path.startswith(str(root) + os.sep):
            location = f"{os.path.relpath(path, root)}:{frame.lineno}"
            break
    text = str(error).strip()
    # one line, but a state_dict mismatch keeps its key lists (torch puts them on later lines)
    message = " ".join(line.strip() for line in text.splitlines()) if "state_dict" in text else \
        (text.splitlines()[0] if text else "")
    return {"type": type(error).__name__, "message": message, "file": getattr(error, "file", None),
            "phase": phase, "module": module, "location": location,
            "traceback": "".join(traceback.format_exception(error))[-4000:]}


def train_step(spec: BuildSpec, optimizer: torch.optim.Optimizer) -> tuple[Any, torch.Tensor]:
    optimizer.zero_grad(set_to_none=True)
    output = run_forward(spec)
    loss = compute_loss(spec, output)
    loss.backward()
    optimizer.step()
    return output, loss


def _state_tensors(spec: BuildSpec, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    tensors = list(spec.model.parameters()) + list(spec.model.buffers())
    tensors += [t for _, t in flatten("b", spec.batch)] + [t for _, t in flatten("t", spec.target)]
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return tensors


def _apply_reference_init(spec: BuildSpec, init: dict[str, Any], renames: dict[str, str]) -> None:
    """Same initial parameters and inputs as the reference (--share-state): differences come from
    the computation, not from the initialisation or the data."""
    spec.model.load_state_dict({rename(k, renames): v for k, v in init["state"].items()}, strict=True)

    def like(reference: Any, own: Any) -> Any:
        ref_leaves, own_leaves = flatten("x", reference), flatten("x", own)
        if [n for n, _ in ref_leaves] != [n for n, _ in own_leaves]:
            return own  # different structure: keep the migrated side's own inputs
        replacements = iter(t for _, t in ref_leaves)
        return map_tensors(own, lambda t: next(replacements).to(device=t.device, dtype=t.dtype))

    spec.batch = like(init["batch"], spec.batch)
    if spec.target is not None:
        spec.target = like(init["target"], spec.target)


def rename(name: str, renames: dict[str, str]) -> str:
    """Apply --rename OLD=NEW to a dotted parameter or module path (whole components only)."""
    for old, new in renames.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return name


def _unrename(tensors: OrderedDict[str, _Value], renames: dict[str, str]) -> OrderedDict[str, _Value]:
    """The migrated side's tensor names under the original's names, so the two records line up."""
    back = {new: old for old, new in renames.items()}
    out: OrderedDict[str, _Value] = OrderedDict()
    for name, tensor in tensors.items():
        kind, sep, rest = name.partition("/")
        if sep and kind in ("grad", "param", "buffer"):
            name = f"{kind}/{rename(rest, back)}"
        elif sep and kind == "act":
            module, hash_, tail = rest.partition("#")
            name = f"act/{rename(module, back)}{hash_}{tail}"
        out[name] = tensor
    return out


def run_job(side: Side, job: dict[str, Any]) -> dict[str, Any]:
    root = Path(job["root"]).resolve()
    steps, seed = int(job.get("steps", 1)), int(job.get("seed", 0))
    tensors: OrderedDict[str, torch.Tensor] = OrderedDict()
    result: dict[str, Any] = {"side": side.name, "backend": side.backend, "device": side.device,
                              "tensors": tensors, "events": [], "modules": {}, "memory": None,
                              "amp_used": False, "error": None, "timing": {}}
    started = time.perf_counter()
    os.chdir(root)
    sys.path.insert(0, str(root))
    try:
        build = load_build(root, job["entry"])
        seed_everything(seed)
        spec = call_build(build, side.device)
        spec.model.to(side.device)
        spec.batch = map_tensors(spec.batch, lambda t: t.to(side.device))
        spec.target = map_tensors(spec.target, lambda t: t.to(side.device))
        if side.name == "reference":
            result["init"] = {"state": {k: to_cpu_copy(v) for k, v in spec.model.state_dict().items()},
                              "batch": map_tensors(spec.batch, to_cpu_copy),
                              "target": map_tensors(spec.target, to_cpu_copy)}
        elif job.get("init"):
            _apply_reference_init(spec, torch.load(job["init"], weights_only=False)["init"], job.get("renames") or {})
        optimizer = spec.optimizer or torch.optim.SGD(spec.model.parameters(), lr=0.01)
        result["modules"] = module_locations(spec.model, str(root))
    except Exception as error:  # reported to the parent, which decides
        result["error"] = describe_error(error, root, "build", None)
        return result
    result["timing"]["build_s"] = time.perf_counter() - started

    if job.get("memory", True):
        saved_model = copy.deepcopy({k: to_cpu_copy(v) for k, v in spec.model.state_dict().items()})
        saved_optimizer = copy.deepcopy(optimizer.state_dict())
        seed_everything(seed)
        t0 = time.perf_counter()

        def run_steps() -> None:
            for _ in range(steps):
                train_step(spec, optimizer)
        try:
            if side.stats is None:
                result["memory"] = peak.cpu_peak(run_steps, peak.live_bytes(_state_tensors(spec, optimizer)))
            else:
                result["memory"] = peak.device_peak(run_steps, side.stats)
        except Exception as error:  # the instrumented run below reports it with a location
            result["timing"]["memory_error"] = f"{type(error).__name__}: {error}"
        result["timing"]["memory_s"] = time.perf_counter() - t0
        spec.model.load_state_dict(saved_model)
        optimizer.load_state_dict(saved_optimizer)
        optimizer.zero_grad(set_to_none=True)

    seed_everything(seed)
    recorder = Recorder(spec.model, tensors)
    t0 = time.perf_counter()
    try:
        for step in range(steps):
            optimizer.zero_grad(set_to_none=True)
            output = run_forward(spec)
            if step == 0:
                recorder.stop_recording()
                for name, tensor in flatten("output", output):
                    tensors[name] = to_cpu_copy(tensor)
            loss = compute_loss(spec, output)
            tensors[f"loss/step{step}"] = to_cpu_copy(loss)
            loss.backward()
            if step == 0:
                for name, param in spec.model.named_parameters():
                    if param.grad is not None:
                        tensors[f"grad/{name}"] = to_cpu_copy(param.grad)
            optimizer.step()
        for name, param in spec.model.named_parameters():
            tensors[f"param/{name}"] = to_cpu_copy(param)
        for name, buffer in spec.model.named_buffers():
            tensors[f"buffer/{name}"] = to_cpu_copy(buffer)
    except Exception as error:
        module = recorder.stack[-1] if recorder.stack else None
        result["error"] = describe_error(error, root, "step", module)
    finally:
        recorder.remove()
    result["timing"]["steps_s"] = time.perf_counter() - t0
    result["events"] = recorder.events
    if job.get("renames"):
        back = {new: old for old, new in job["renames"].items()}
        result["tensors"] = _unrename(tensors, job["renames"])
        result["modules"] = {rename(k, back): v for k, v in result["modules"].items()}
        for event in result["events"]:
            event["module"] = rename(event["module"], back)
            event["tensors"] = list(_unrename(OrderedDict.fromkeys(event["tensors"]), job["renames"]))
    result["amp_used"] = side.amp_used
    return result


def _forget(root: Path) -> None:
    """Drop the job's modules so that the next job (maybe a sibling tree) imports its own."""
    prefix = str(root) + os.sep
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(path).startswith(prefix):
            del sys.modules[name]
    while str(root) in sys.path:
        sys.path.remove(str(root))


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    cwd = os.getcwd()
    try:
        side = Side(config)
    except Exception as error:
        for job in config["jobs"]:
            torch.save({"error": {"type": type(error).__name__, "message": str(error), "phase": "setup",
                                  "module": None, "location": None, "traceback": ""}},
                       job["out"])
        return 0
    for job in config["jobs"]:
        result = run_job(side, job)
        torch.save(result, job["out"])
        _forget(Path(job["root"]).resolve())
        os.chdir(cwd)
        if side.name == "target":  # the next job starts from a clean autocast flag
            side.amp_used = False
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

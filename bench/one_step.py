"""Run a training or inference script until its first optimizer step, then stop it.

    python bench/one_step.py SCRIPT [ARGS...]                            # original, plain CPU
    python -m npu_migrate.emulation bench/one_step.py SCRIPT [ARGS...]   # migrated, emulated NPU

The script runs as `__main__` (its folder first on `sys.path`, as `python SCRIPT` has it, then the
working directory, the project folder, as after `pip install -e .`). A hook
on every optimizer's `step` ends the run after the first step has finished; a script without an
optimizer (inference) runs to its end. The last line printed is a JSON verdict for
bench/runs_bench.py: `{"status": "ok", "steps": 1, "device": "npu:0"}` or `{"status": "failed",
"type": ..., "message": ..., "where": "file:line"}`."""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path


class _OneStepDone(BaseException):
    """Raised by the hook after the first optimizer step: not an Exception, so a script's own
    `except Exception` cannot swallow it."""


def _first_parameter_device(optimizer: object) -> str:
    for group in getattr(optimizer, "param_groups", []):
        for parameter in group.get("params", []):
            return str(parameter.device)
    return "?"


def _where(error: BaseException, script: str) -> str:
    """The innermost frame of the project (not torch, not this driver) the error passed through."""
    frames = traceback.extract_tb(error.__traceback__)
    root = os.path.dirname(os.path.abspath(script))
    own = [f for f in frames if os.path.abspath(f.filename).startswith(root)]
    chosen = own or list(frames)
    if not chosen:
        return "?"
    return f"{os.path.relpath(chosen[-1].filename, root)}:{chosen[-1].lineno}"


def _declare_torchvision_ops(torch: object) -> None:
    """On a machine whose only torchvision wheel is a CUDA build (this one), its compiled ops do
    not load with CPU torch and `import torchvision` fails declaring fake kernels for `nms` and
    `qnms`. Declaring those two schemas lets the pure-Python parts import (transforms, datasets,
    models); calling a compiled op still raises. The same for the original and the migrated run."""
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    library = next(Path(spec.submodule_search_locations[0]).glob("_C*.so"), None)
    try:
        if library is not None:
            torch.ops.load_library(str(library))  # type: ignore[attr-defined]
            return
    except OSError:
        pass
    declared = torch.library.Library("torchvision", "DEF")  # type: ignore[attr-defined]
    for name in ("nms", "qnms"):
        declared.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _KEEP.append(declared)


_KEEP: list[object] = []  # the library object must outlive the run, or the schemas go with it


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    script = os.path.abspath(argv[0])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    # the script's folder first, as `python SCRIPT` has it, then the project folder (the working
    # directory), as after `pip install -e .`
    sys.path[:0] = [os.path.dirname(script), os.getcwd()]
    sys.argv = [script, *argv[1:]]
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _declare_torchvision_ops(torch)

    seen: dict[str, str] = {}

    def stop_after_first(optimizer: object, *_: object) -> None:
        seen["device"] = _first_parameter_device(optimizer)
        raise _OneStepDone

    register_optimizer_step_post_hook(stop_after_first)
    verdict: dict[str, object]
    try:
        runpy.run_path(script, run_name="__main__")
        verdict = {"status": "ok", "steps": 0, "note": "ran to its end without an optimizer step"}
    except _OneStepDone:
        verdict = {"status": "ok", "steps": 1, "device": seen.get("device", "?")}
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) or stop.code is None else 1
        verdict = {"status": "ok" if not code else "failed", "steps": 0, "type": "SystemExit",
                   "message": str(stop.code)[:300]}
    except BaseException as error:
        traceback.print_exc()
        verdict = {"status": "failed", "type": type(error).__name__, "message": str(error).strip()[:300],
                   "where": _where(error, script)}
    sys.stdout.flush()
    print("\n" + json.dumps(verdict), flush=True)
    return 0


if __name__ == "__main__":
    sys.stderr.flush()
    # a hard exit: loader workers, loggers and other threads the script left must not hold it open
    os._exit(main(sys.argv[1:]))

"""Run a training script for a few steps: `tune_steps.py STEPS SCRIPT [ARGS...]`.

bench/tune_public_scripts.py runs each tuned script as
`python -m npu_migrate.emulation bench/tune_steps.py 2 train.py ...`: the script runs as
`__main__` (its folder first on `sys.path`, as `python train.py` has it) under the emulation,
and stops when it calls `backward()` for the STEPS+1-th time (the step `npu-migrate verify`
stops at too), so that scripts which train for hundreds of epochs with no option to stop early
run a few steps. Prints `tune_steps: N steps` on stdout and exits 0 when it stopped or the
script ended; a script's own exception propagates.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

import torch


class _Enough(BaseException):
    """Raised at the STEPS+1-th backward (a BaseException: a script's `except Exception` keeps out)."""


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    steps, script = int(argv[0]), argv[1]
    done = 0
    original = torch.Tensor.backward

    def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        nonlocal done
        if done == steps:
            raise _Enough
        done += 1
        return original(self, *args, **kwargs)

    torch.Tensor.backward = counted  # type: ignore[method-assign]
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except _Enough:
        pass
    print(f"tune_steps: {done} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

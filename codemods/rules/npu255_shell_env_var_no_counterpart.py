"""NPU255: the shell-env-var-no-counterpart rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.base import Fix
from codemods.framework.families.shell import ShellRule


class ShellEnvNoCounterpart(ShellRule):
    code = "NPU255"
    name = "shell-env-var-no-counterpart"
    summary = "Launch scripts: CUDA/NCCL variables with no verified NPU counterpart are reported"
    fix = Fix.NONE
    kinds = frozenset({"flag"})
    prefilter = envmap.names_pattern(kinds)


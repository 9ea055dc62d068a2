"""NPU205: the env-var-no-counterpart rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.base import Fix
from codemods.framework.families.env_vars import EnvVarRule


class EnvNoCounterpart(EnvVarRule):
    code = "NPU205"
    name = "env-var-no-counterpart"
    summary = "CUDA/NCCL variables with no verified NPU counterpart are reported (NCCL_*, CUDA_*, ...)"
    fix = Fix.NONE
    kinds = frozenset({"flag"})
    prefilter = envmap.names_pattern(kinds)


"""NPU202: the env-var-rename rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.env_vars import EnvVarRule


class EnvVarRename(EnvVarRule):
    code = "NPU202"
    name = "env-var-rename"
    summary = "CUDA/NCCL variables with an exact NPU counterpart are renamed (`CUDA_LAUNCH_BLOCKING`, `TORCH_NCCL_*`, ...)"
    kinds = frozenset({"rename"})
    prefilter = envmap.names_pattern(kinds)


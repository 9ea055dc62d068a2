"""NPU252: the shell-env-var-rename rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.shell import ShellRule


class ShellEnvVarRename(ShellRule):
    code = "NPU252"
    name = "shell-env-var-rename"
    summary = "Launch scripts: CUDA/NCCL variables with an exact NPU counterpart are renamed"
    kinds = frozenset({"rename"})
    prefilter = envmap.names_pattern(kinds)


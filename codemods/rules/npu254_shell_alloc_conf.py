"""NPU254: the shell-alloc-conf rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellAllocConf(ShellRule):
    code = "NPU254"
    name = "shell-alloc-conf"
    summary = "Launch scripts: `PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; refused keys are errors"
    severity = Severity.ERROR
    kinds = frozenset({"alloc_conf"})
    prefilter = envmap.names_pattern(kinds)


"""NPU253: the shell-hccl-buffsize rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellHcclBuffsize(ShellRule):
    code = "NPU253"
    name = "shell-hccl-buffsize"
    summary = "Launch scripts: `NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB); computed values flagged"
    severity = Severity.WARNING
    kinds = frozenset({"bytes_to_mb"})
    prefilter = envmap.names_pattern(kinds)


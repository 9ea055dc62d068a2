"""NPU257: the shell-nvidia-smi rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellNvidiaSmi(ShellRule):
    code = "NPU257"
    name = "shell-nvidia-smi"
    summary = "Launch scripts: `nvidia-smi` is reported (Ascend hosts have `npu-smi`)"
    fix = Fix.NONE
    severity = Severity.WARNING
    kinds = frozenset({"nvidia_smi"})
    prefilter = r"nvidia-smi"


"""NPU207: the nvidia-smi-command rule."""

from __future__ import annotations

from codemods.framework.base import Fix
from codemods.framework.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class NvidiaSmiCommand(EnvVarRule):
    code = "NPU207"
    name = "nvidia-smi-command"
    summary = "`nvidia-smi` in subprocess commands is reported (Ascend hosts have `npu-smi`)"
    fix = Fix.NONE
    severity = Severity.WARNING
    kinds = frozenset({"nvidia_smi"})
    prefilter = r"nvidia-smi"


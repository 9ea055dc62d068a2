"""NPU251: the shell-visible-devices rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellVisibleDevices(ShellRule):
    code = "NPU251"
    name = "shell-visible-devices"
    summary = "Launch scripts: `CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)


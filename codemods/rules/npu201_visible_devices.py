"""NPU201: the visible-devices rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class VisibleDevices(EnvVarRule):
    code = "NPU201"
    name = "visible-devices"
    summary = "`CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; device ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)


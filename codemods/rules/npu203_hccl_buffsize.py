"""NPU203: the hccl-buffsize rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class HcclBuffsize(EnvVarRule):
    code = "NPU203"
    name = "hccl-buffsize"
    summary = "`NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB): literal values converted, computed ones flagged"
    severity = Severity.WARNING
    kinds = frozenset({"bytes_to_mb"})
    prefilter = envmap.names_pattern(kinds)


"""NPU204: the alloc-conf rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class AllocConf(EnvVarRule):
    code = "NPU204"
    name = "alloc-conf"
    summary = "`PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; keys torch_npu refuses are errors"
    severity = Severity.ERROR
    kinds = frozenset({"alloc_conf"})
    prefilter = envmap.names_pattern(kinds)


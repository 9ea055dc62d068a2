"""NPU206: the launch-backend-arg rule."""

from __future__ import annotations

from codemods.framework.families.env_vars import EnvVarRule


class LaunchBackendArg(EnvVarRule):
    code = "NPU206"
    name = "launch-backend-arg"
    summary = "`--backend nccl` (and `--dist-backend`, `--ddp_backend`) in subprocess commands becomes `hccl`"
    kinds = frozenset({"backend"})
    prefilter = "nccl"


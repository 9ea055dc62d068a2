"""NPU256: the shell-backend-arg rule."""

from __future__ import annotations

from codemods.framework.families.shell import ShellRule


class ShellBackendArg(ShellRule):
    code = "NPU256"
    name = "shell-backend-arg"
    summary = "Launch scripts: `--backend nccl` (`--dist-backend`, `--ddp_backend`, ...) becomes `hccl`"
    kinds = frozenset({"backend"})
    prefilter = "nccl"


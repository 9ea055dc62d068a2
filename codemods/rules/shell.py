"""NPU251-NPU257: launch scripts (`*.sh`): the environment mapping of NPU201-NPU207, line-based.

Each rule rewrites only words it understands -- `NAME=value` assignments (also after `export`,
`env`, `docker -e`, `mpirun -x`), `export/unset NAME`, `$NAME` / `${NAME...}` expansions outside
single quotes, `--backend nccl` launcher arguments -- and never text inside comments, single
quotes or `echo`/`printf` arguments. An edit on a line carrying `# npu-migrate: ignore[CODE]` is
skipped here; the engine drops suppressed diagnostics.
"""

from __future__ import annotations

from typing import ClassVar

from npu_migrate.core.diagnostics import Severity
from codemods.framework import envmap
from codemods.framework.base import Fix, Rule
from codemods.framework.shellwords import LineIndex


class _ShellRule(Rule):
    language = "shell"
    fix = Fix.SAFE
    kinds: ClassVar[frozenset[str]] = frozenset()

    def rewrite_text(self, text: str) -> str:
        index = LineIndex(text)
        edits = []
        said: set[tuple[int, str]] = set()  # a name and its value edit are one explained change
        for change in envmap.shell_changes(text, self.kinds):
            line, col = index.position(change.offset)
            if change.replacement is None:
                self.report_at(line, col, change.message, change.severity)
            elif not self.context.suppressions.suppresses(self.code, line):
                edits.append(change)
                if (line, change.message) not in said:
                    said.add((line, change.message))
                    self.fixed_at(line, col, change.message)
        return envmap.apply_changes(text, edits)


class ShellVisibleDevices(_ShellRule):
    code = "NPU251"
    name = "shell-visible-devices"
    summary = "Launch scripts: `CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)


class ShellEnvVarRename(_ShellRule):
    code = "NPU252"
    name = "shell-env-var-rename"
    summary = "Launch scripts: CUDA/NCCL variables with an exact NPU counterpart are renamed"
    kinds = frozenset({"rename"})
    prefilter = envmap.names_pattern(kinds)


class ShellHcclBuffsize(_ShellRule):
    code = "NPU253"
    name = "shell-hccl-buffsize"
    summary = "Launch scripts: `NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB); computed values flagged"
    severity = Severity.WARNING
    kinds = frozenset({"bytes_to_mb"})
    prefilter = envmap.names_pattern(kinds)


class ShellAllocConf(_ShellRule):
    code = "NPU254"
    name = "shell-alloc-conf"
    summary = "Launch scripts: `PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; refused keys are errors"
    severity = Severity.ERROR
    kinds = frozenset({"alloc_conf"})
    prefilter = envmap.names_pattern(kinds)


class ShellEnvNoCounterpart(_ShellRule):
    code = "NPU255"
    name = "shell-env-var-no-counterpart"
    summary = "Launch scripts: CUDA/NCCL variables with no verified NPU counterpart are reported"
    fix = Fix.NONE
    kinds = frozenset({"flag"})
    prefilter = envmap.names_pattern(kinds)


class ShellBackendArg(_ShellRule):
    code = "NPU256"
    name = "shell-backend-arg"
    summary = "Launch scripts: `--backend nccl` (`--dist-backend`, `--ddp_backend`, ...) becomes `hccl`"
    kinds = frozenset({"backend"})
    prefilter = "nccl"


class ShellNvidiaSmi(_ShellRule):
    code = "NPU257"
    name = "shell-nvidia-smi"
    summary = "Launch scripts: `nvidia-smi` is reported (Ascend hosts have `npu-smi`)"
    fix = Fix.NONE
    severity = Severity.WARNING
    kinds = frozenset({"nvidia_smi"})
    prefilter = r"nvidia-smi"

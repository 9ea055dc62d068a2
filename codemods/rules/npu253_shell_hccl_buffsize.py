"""NPU253: the shell-hccl-buffsize rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellHcclBuffsize(ShellRule):
    r"""## What it does

    Launch scripts: `NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB); a computed value or a read is reported.

    ## Why

    The launch-script twin of NPU203: see `docs/rules/NPU203.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU253]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    export NCCL_BUFFSIZE=8388608
    export NCCL_BUFFSIZE=$((8*1024*1024))   # reported: computed
    # after
    export HCCL_BUFFSIZE=8
    export NCCL_BUFFSIZE=$((8*1024*1024))   # set HCCL_BUFFSIZE in MB instead
    ```

    ## Fix safety

    Safe for literals (rounded up to whole MB); computed values are left to the user.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU253"
    name = "shell-hccl-buffsize"
    summary = "Launch scripts: `NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB); computed values flagged"
    severity = Severity.WARNING
    kinds = frozenset({"bytes_to_mb"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
export NCCL_BUFFSIZE=8388608
export NCCL_BUFFSIZE=$((8*1024*1024))   # reported: computed
""",
        after="""\
export HCCL_BUFFSIZE=8
export NCCL_BUFFSIZE=$((8*1024*1024))   # reported: computed
""",
        path='launch.sh',
    ),
    Invalid(
        """\
export NCCL_BUFFSIZE=8388608
""",
        after="""\
export HCCL_BUFFSIZE=8
""",
        path='run.sh',
    ),
    Invalid(
        """\
export NCCL_BUFFSIZE='0x1000000'
""",
        after="""\
export HCCL_BUFFSIZE='16'
""",
        path='run.sh',
    ),
]

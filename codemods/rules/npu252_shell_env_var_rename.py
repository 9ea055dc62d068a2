"""NPU252: the shell-env-var-rename rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.analyses.portable import shell_rename_twins
from codemods.api.cases import Invalid, Valid
from codemods.families.shell import ShellRule


class ShellEnvVarRename(ShellRule):
    r"""## What it does

    Launch scripts: CUDA/NCCL variables with an exact NPU counterpart are renamed; the value is kept.

    ## Why

    The launch-script twin of NPU202: see `docs/rules/NPU202.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU252]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    export CUDA_LAUNCH_BLOCKING=1 TORCH_NCCL_ASYNC_ERROR_HANDLING=1
    # after
    export ASCEND_LAUNCH_BLOCKING=1 TORCH_HCCL_ASYNC_ERROR_HANDLING=1
    ```

    ## Fix safety

    Safe: same meaning, same values.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the NPU name is set beside the CUDA one, which stays (`export TORCH_HCCL_BLOCKING_WAIT=1 TORCH_NCCL_BLOCKING_WAIT=1`), as NPU251 does for the visible devices: one launch script for CUDA and Ascend hosts
    """

    code = "NPU252"
    name = "shell-env-var-rename"
    summary = "Launch scripts: CUDA/NCCL variables with an exact NPU counterpart are renamed"
    kinds = frozenset({"rename"})
    prefilter = envmap.names_pattern(kinds)
    supported_targets = frozenset({"npu", "portable"})

    def rewrite_text(self, text: str) -> str:
        if self.target != "portable":
            return super().rewrite_text(text)
        return self.apply_twins(text, shell_rename_twins(text))


CASES = [
    Invalid(
        """\
export TORCH_NCCL_BLOCKING_WAIT=1
CUDA_LAUNCH_BLOCKING=1 python train.py
""",
        after="""\
export TORCH_HCCL_BLOCKING_WAIT=1 TORCH_NCCL_BLOCKING_WAIT=1
ASCEND_LAUNCH_BLOCKING=1 CUDA_LAUNCH_BLOCKING=1 python train.py
""",
        path="launch.sh",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
export CUDA_LAUNCH_BLOCKING=1 TORCH_NCCL_ASYNC_ERROR_HANDLING=1
""",
        after="""\
export ASCEND_LAUNCH_BLOCKING=1 TORCH_HCCL_ASYNC_ERROR_HANDLING=1
""",
        path='launch.sh',
    ),
    Valid(
        """\
export ASCEND_LAUNCH_BLOCKING=1 TORCH_HCCL_ASYNC_ERROR_HANDLING=1
""",
        path='launch.sh',
    ),
    Invalid(
        """\
export A=1 CUDA_LAUNCH_BLOCKING=1 B=2
""",
        after="""\
export A=1 ASCEND_LAUNCH_BLOCKING=1 B=2
""",
        path='run.sh',
    ),
    Invalid(
        """\
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
""",
        after="""\
export TORCH_HCCL_ASYNC_ERROR_HANDLING=1
""",
        path='run.sh',
    ),
    Invalid(
        """\
cat > job.sh <<EOF
don't panic
export CUDA_VISIBLE_DEVICES=0
EOF
export CUDA_LAUNCH_BLOCKING=1
""",
        after="""\
cat > job.sh <<EOF
don't panic
export ASCEND_RT_VISIBLE_DEVICES=0
EOF
export ASCEND_LAUNCH_BLOCKING=1
""",
        codes=('NPU251', 'NPU252'),
        with_rules=('NPU251',),
        path='run.sh',
    ),
]

"""NPU255: the shell-env-var-no-counterpart rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.shell import ShellRule


class ShellEnvNoCounterpart(ShellRule):
    r"""## What it does

    Launch scripts: CUDA/NCCL variables with no verified NPU counterpart are reported (diagnostic only).

    ## Why

    The launch-script twin of NPU205: see `docs/rules/NPU205.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU255]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    export NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0   # NPU255 info, twice
    ```

    ## Fix safety

    No fix: diagnostic only.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU255"
    supported_targets = frozenset({"npu", "portable"})
    name = "shell-env-var-no-counterpart"
    summary = "Launch scripts: CUDA/NCCL variables with no verified NPU counterpart are reported"
    fix = Fix.NONE
    kinds = frozenset({"flag"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(  # minRF's advanced/run_multi.sh: settings written to DeepSpeed's env file
        """\
        echo "NCCL_P2P_DISABLE=1" > ~/.deepspeed_env
        echo "NCCL_P2P_DISABLE=1 is what we used"
        """,
        path="run_multi.sh",
        lines=(1,),
    ),
    Invalid(
        """\
export NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0
""",
        path='launch.sh',
    ),
    # open_clip's scripts/h14_84_8_pretrain.sh
    Invalid(
        """\
TORCH_CUDNN_V8_API_ENABLED=1 torchrun --nproc_per_node 8 -m open_clip_train.main
""",
        path='launch.sh',
    ),
]

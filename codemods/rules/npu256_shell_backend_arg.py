"""NPU256: the shell-backend-arg rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.shell import ShellRule


class ShellBackendArg(ShellRule):
    r"""## What it does

    Launch scripts: `--backend nccl` (`--dist-backend`, `--dist_backend`, `--ddp_backend`, `--distributed-backend`) becomes `hccl`.

    ## Why

    Training scripts take the process-group backend on the command line and pass it to `init_process_group`; on Ascend it is `hccl`. The value is rewritten after any of the backend flags, as `--flag nccl`, `--flag=nccl` or quoted.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU256]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    torchrun --nproc_per_node=8 train.py --backend nccl
    python -m torch.distributed.launch main.py --dist-backend='nccl'
    # after
    torchrun --nproc_per_node=8 train.py --backend hccl
    python -m torch.distributed.launch main.py --dist-backend='hccl'
    ```

    ## Fix safety

    Safe: `hccl` is the NPU collective backend; computed values (`"${BACKEND:-nccl}"`) are left alone.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU256"
    name = "shell-backend-arg"
    summary = "Launch scripts: `--backend nccl` (`--dist-backend`, `--ddp_backend`, ...) becomes `hccl`"
    kinds = frozenset({"backend"})
    prefilter = "nccl"


CASES = [
    Invalid(
        """\
torchrun --nproc_per_node=8 train.py --backend nccl
python -m torch.distributed.launch main.py --dist-backend='nccl'
""",
        after="""\
torchrun --nproc_per_node=8 train.py --backend hccl
python -m torch.distributed.launch main.py --dist-backend='hccl'
""",
        path='launch.sh',
    ),
    Valid(
        """\
torchrun --nproc_per_node=8 train.py --backend hccl
python -m torch.distributed.launch main.py --dist-backend='hccl'
""",
        path='launch.sh',
    ),
    Invalid(
        """\
torchrun --nproc_per_node=8 train.py --backend nccl
""",
        after="""\
torchrun --nproc_per_node=8 train.py --backend hccl
""",
        path='run.sh',
    ),
    Invalid(
        """\
python -m torch.distributed.launch --nproc_per_node 2 main.py --dist-backend 'nccl'
""",
        after="""\
python -m torch.distributed.launch --nproc_per_node 2 main.py --dist-backend 'hccl'
""",
        path='run.sh',
    ),
    Invalid(
        """\
torchrun t.py --ddp_backend=nccl
""",
        after="""\
torchrun t.py --ddp_backend=hccl
""",
        path='run.sh',
    ),
    Invalid(
        'CUDA_VISIBLE_DEVICES=0,1 \\\n  torchrun --nproc_per_node=2 train.py \\\n  --backend nccl\n',
        after='ASCEND_RT_VISIBLE_DEVICES=0,1 \\\n  torchrun --nproc_per_node=2 train.py \\\n  --backend hccl\n',
        codes=('NPU251', 'NPU256'),
        with_rules=('NPU251',),
        path='run.sh',
    ),
    Valid(
        """\
python t.py --backend "${BACKEND:-nccl}"
""",
        with_rules=('NPU251', 'NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
python t.py nccl
""",
        with_rules=('NPU251', 'NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU257'),
        path='run.sh',
    ),
]

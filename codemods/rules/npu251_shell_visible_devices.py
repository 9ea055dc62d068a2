"""NPU251: the shell-visible-devices rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.analyses.portable import shell_visible_twins
from codemods.api.cases import Invalid
from codemods.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellVisibleDevices(ShellRule):
    r"""## What it does

    Launch scripts: `CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; a literal device list that is not strictly ascending is an error.

    ## Why

    The launch-script twin of NPU201: see `docs/rules/NPU201.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU251]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    export CUDA_VISIBLE_DEVICES=0,1,2,3
    CUDA_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py   # error: not ascending
    echo "using $CUDA_VISIBLE_DEVICES"
    # after
    export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
    ASCEND_RT_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py   # still reported: write 0,1
    echo "using $ASCEND_RT_VISIBLE_DEVICES"
    ```

    ## Fix safety

    Safe: only the name changes; values are never reordered.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `ASCEND_RT_VISIBLE_DEVICES` is set beside every assignment (and `unset`) of `CUDA_VISIBLE_DEVICES`, which stays: one launch script serves CUDA and Ascend hosts, each runtime reading its own variable (reads of `$CUDA_VISIBLE_DEVICES` keep working, as both are set); a literal list torch_npu cannot read is reported as for npu
    """

    code = "NPU251"
    name = "shell-visible-devices"
    summary = "Launch scripts: `CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)
    supported_targets = frozenset({"npu", "portable"})

    def rewrite_text(self, text: str) -> str:
        if self.target != "portable":
            return super().rewrite_text(text)
        return self.apply_twins(text, shell_visible_twins(text))


CASES = [
    Invalid(
        """\
export CUDA_VISIBLE_DEVICES=0,1,2,3
CUDA_VISIBLE_DEVICES=$LOCAL_RANK python train.py
docker run -e CUDA_VISIBLE_DEVICES=0 image
unset CUDA_VISIBLE_DEVICES
echo "using $CUDA_VISIBLE_DEVICES"
""",
        after="""\
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3 CUDA_VISIBLE_DEVICES=0,1,2,3
ASCEND_RT_VISIBLE_DEVICES=$LOCAL_RANK CUDA_VISIBLE_DEVICES=$LOCAL_RANK python train.py
docker run -e ASCEND_RT_VISIBLE_DEVICES=0 -e CUDA_VISIBLE_DEVICES=0 image
unset ASCEND_RT_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES
echo "using $CUDA_VISIBLE_DEVICES"
""",
        path="launch.sh",
        options=(("target", "portable"),),
    ),
    Invalid(  # not ascending: torch_npu would see no device
        """\
CUDA_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py
""",
        after="""\
ASCEND_RT_VISIBLE_DEVICES=1,0 CUDA_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py
""",
        path="launch.sh",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
export CUDA_VISIBLE_DEVICES=0,1,2,3
CUDA_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py   # error: not ascending
echo "using $CUDA_VISIBLE_DEVICES"
""",
        after="""\
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
ASCEND_RT_VISIBLE_DEVICES=1,0 torchrun --nproc_per_node=2 train.py   # error: not ascending
echo "using $ASCEND_RT_VISIBLE_DEVICES"
""",
        path='launch.sh',
    ),
]

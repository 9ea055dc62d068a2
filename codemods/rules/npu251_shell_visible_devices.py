"""NPU251: the shell-visible-devices rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.analyses.portable import shell_visible_twins
from codemods.api.cases import Invalid, Valid
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
    Invalid(  # minRF's advanced/run_multi.sh: DeepSpeed's launcher exports its env file on every node
        """\
        rm -f ~/.deepspeed_env
        echo "CUDA_VISIBLE_DEVICES=0,1" >> ~/.deepspeed_env
        echo CUDA_VISIBLE_DEVICES=0,1
        """,
        after="""\
        rm -f ~/.deepspeed_env
        echo "ASCEND_RT_VISIBLE_DEVICES=0,1" >> ~/.deepspeed_env
        echo CUDA_VISIBLE_DEVICES=0,1
        """,
        path="run_multi.sh",
    ),
    Invalid(  # the portable target cannot put two variables on one line of the env file
        """\
        echo "CUDA_VISIBLE_DEVICES=0,1" >> ~/.deepspeed_env
        """,
        path="run_multi.sh",
        options=(("target", "portable"),),
        lines=(1,),
    ),
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
    Invalid(
        """\
export CUDA_VISIBLE_DEVICES=0,1
""",
        after="""\
export ASCEND_RT_VISIBLE_DEVICES=0,1
""",
        path='run.sh',
    ),
    Invalid(
        """\
export CUDA_VISIBLE_DEVICES="0,1,2,3"
""",
        after="""\
export ASCEND_RT_VISIBLE_DEVICES="0,1,2,3"
""",
        path='run.sh',
    ),
    Invalid(
        """\
CUDA_VISIBLE_DEVICES=0,1 python train.py
""",
        after="""\
ASCEND_RT_VISIBLE_DEVICES=0,1 python train.py
""",
        path='run.sh',
    ),
    Invalid(
        """\
env CUDA_VISIBLE_DEVICES=3 python t.py
""",
        after="""\
env ASCEND_RT_VISIBLE_DEVICES=3 python t.py
""",
        path='run.sh',
    ),
    Invalid(
        """\
docker run -e CUDA_VISIBLE_DEVICES=0 img
""",
        after="""\
docker run -e ASCEND_RT_VISIBLE_DEVICES=0 img
""",
        path='run.sh',
    ),
    Invalid(
        """\
mpirun -x CUDA_VISIBLE_DEVICES -np 2 python t.py
""",
        after="""\
mpirun -x ASCEND_RT_VISIBLE_DEVICES -np 2 python t.py
""",
        path='run.sh',
    ),
    Invalid(
        """\
unset CUDA_VISIBLE_DEVICES
""",
        after="""\
unset ASCEND_RT_VISIBLE_DEVICES
""",
        path='run.sh',
    ),
    Invalid(
        """\
echo "$CUDA_VISIBLE_DEVICES ${CUDA_VISIBLE_DEVICES:-0}"
""",
        after="""\
echo "$ASCEND_RT_VISIBLE_DEVICES ${ASCEND_RT_VISIBLE_DEVICES:-0}"
""",
        path='run.sh',
    ),
    Invalid(
        """\
N=$(echo $CUDA_VISIBLE_DEVICES | tr , ' ' | wc -w)
""",
        after="""\
N=$(echo $ASCEND_RT_VISIBLE_DEVICES | tr , ' ' | wc -w)
""",
        path='run.sh',
    ),
    Invalid(
        "echo $'it\\'s'\nexport CUDA_VISIBLE_DEVICES=0\n",
        after="echo $'it\\'s'\nexport ASCEND_RT_VISIBLE_DEVICES=0\n",
        path='run.sh',
    ),
    Valid(
        """\
# export CUDA_VISIBLE_DEVICES=0,1
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
python t.py  # CUDA_VISIBLE_DEVICES=0 --backend nccl
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
echo 'CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES'
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
echo CUDA_VISIBLE_DEVICES=0
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
echo "Set CUDA_VISIBLE_DEVICES first"
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
export MY_CUDA_VISIBLE_DEVICES=3,1
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
export ASCEND_RT_VISIBLE_DEVICES=0,1
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
torchrun t.py --backend gloo
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
python t.py --rdzv_backend c10d
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
    Valid(
        """\
CUDA_FLAG="--cuda"
uv run main.py $CUDA_FLAG
""",
        with_rules=('NPU252', 'NPU253', 'NPU254', 'NPU255', 'NPU256', 'NPU257'),
        path='run.sh',
    ),
]

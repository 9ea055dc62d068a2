"""NPU620 `launch-env-shell`: launch scripts export the Ascend launch environment before training
starts."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.targets import api_table
from codemods.families.tune import TuneRule, first_launch, launch_settings
from codemods.model.shellwords import LineIndex

APIS = ("TASK_QUEUE_ENABLE=2", "CPU_AFFINITY_CONF", "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True",
        "ACL_OP_COMPILER_CACHE_MODE")


class LaunchEnvShell(TuneRule):
    """## What it does

    A launch script (`*.sh`) that starts training (`python`, `torchrun`, `deepspeed`,
    `accelerate launch`) gets `export` lines for the Ascend launch environment before its first
    launch command, each one it does not set already:

    | variable | value | what it does | torch_npu |
    |---|---|---|---|
    | `TASK_QUEUE_ENABLE` | `2` | operator dispatch queue level 2: workspace tasks move to the second dispatch pipeline (default 1; `ASCEND_LAUNCH_BLOCKING=1` turns the queue off; level 2 may raise the memory peak a little) | 2.3 (levels read from torch_npu 2.1.0-6.0.0 and 2.3.1 on) |
    | `CPU_AFFINITY_CONF` | `1` | binds each device's host threads to its share of the CPU cores (off by default) | 2.3 (2.1.0-6.0.0 and 2.3.1-6.0.rc2 on) |
    | `PYTORCH_NPU_ALLOC_CONF` | `expandable_segments:True` | the caching allocator grows segments in place: less fragmentation | 2.1 |
    | `ACL_OP_COMPILER_CACHE_MODE` | `enable` | keeps CANN's operator-compile disk cache on (its default, stated against an inherited `disable`; point `ACL_OP_COMPILER_CACHE_DIR` at a persistent folder to share it) | all |

    Opt-in: `npu-migrate apply --enable tune` or `--enable launch-env-shell`.

    ## Why

    Every one of 16 ModelZoo ports read beside its upstream launches with such an environment
    (`env_npu.sh` and the like); the upstream CUDA scripts have none. The values are the ones
    torch_npu's documentation recommends (`docs/zh/api/environment_variable/`). A variable the
    script already names (set, exported or read) is left to the script; a variable the configured
    `target-version` does not know is reported instead (codemods/data/api_versions.json).

    ## Example

    ```bash
    # before
    torchrun --nproc_per_node=8 train.py
    # after
    export TASK_QUEUE_ENABLE=2
    export CPU_AFFINITY_CONF=1
    export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
    export ACL_OP_COMPILER_CACHE_MODE=enable
    torchrun --nproc_per_node=8 train.py
    ```

    ## Fix safety

    Safe for the values computed: dispatch queueing, core binding, the allocator's segment policy
    and the compile cache change speed and memory layout, not results. `expandable_segments` must
    not be combined with `max_split_size_mb` or `garbage_collection_threshold`: a script that sets
    `PYTORCH_NPU_ALLOC_CONF` already is left alone.

    ## Targets

    - **npu**: inserts the exports (safe fix); opt-in; per variable, the torch_npu release above
    - **portable**: reports only (the variables are read by torch_npu only)
    """

    code = "NPU620"
    name = "launch-env-shell"
    summary = "Launch scripts export `TASK_QUEUE_ENABLE`, `CPU_AFFINITY_CONF`, `PYTORCH_NPU_ALLOC_CONF`, the compile cache"
    language = "shell"
    prefilter = r"python|torchrun|deepspeed|accelerate"
    api = APIS[0]

    def rewrite_text(self, text: str) -> str:
        at = first_launch(text)
        if at is None:
            return text
        line, _ = LineIndex(text).position(at)
        wanted, too_new = launch_settings(text, self.context.options)
        for entry in too_new:
            self.report_at(line, 1, f"`{entry['name']}={entry['value']}` not exported: it needs torch_npu "
                                    f"{api_table()[entry['api']]['since']}, target-version is "
                                    f"{self.context.options.get('target_version')}")
        if not wanted or self.context.suppressions.suppresses(self.code, line):
            return text
        indent = text[at:len(text) - len(text[at:].lstrip(" \t"))]
        newline = "\r\n" if "\r\n" in text else "\n"
        lines = "".join(f"{indent}export {e['name']}={e['value']}{newline}" for e in wanted)
        self.fixed_at(line, 1, "exported the Ascend launch environment before training starts: "
                               + "; ".join(f"`{e['name']}={e['value']}` ({e['what']})" for e in wanted))
        return text[:at] + lines + text[at:]


CASES = [
    Invalid(
        """\
        #!/bin/bash
        export CUDA_VISIBLE_DEVICES=0
        python train.py --epochs 10
        """,
        after="""\
        #!/bin/bash
        export CUDA_VISIBLE_DEVICES=0
        export TASK_QUEUE_ENABLE=2
        export CPU_AFFINITY_CONF=1
        export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
        export ACL_OP_COMPILER_CACHE_MODE=enable
        python train.py --epochs 10
        """,
        path="train.sh",
    ),
    # target-version 2.2: no level-2 queue, no core binding in every 2.2 release
    Invalid(
        """\
        torchrun --nproc_per_node=2 train.py
        """,
        after="""\
        export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
        export ACL_OP_COMPILER_CACHE_MODE=enable
        torchrun --nproc_per_node=2 train.py
        """,
        path="train.sh",
        options=(("target_version", "2.2"),),
    ),
    Valid("echo 'no training here'\nls data\n", path="prepare.sh"),
]

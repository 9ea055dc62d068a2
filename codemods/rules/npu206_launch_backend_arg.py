"""NPU206: the launch-backend-arg rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.env_vars import EnvVarRule


class LaunchBackendArg(EnvVarRule):
    """## What it does

    `--backend nccl` (and `--dist-backend`, `--dist_backend`, `--ddp_backend`, `--distributed-backend`) in commands given to subprocess becomes `hccl`.

    ## Why

    Training scripts usually take the process-group backend on the command line and pass it to
    `init_process_group`; on Ascend it must be `hccl`. This rule rewrites the value where a Python
    program launches another one: a string or f-string given to `subprocess.run/call/check_call/
    check_output/Popen/getoutput`, `os.system`, `os.popen`, an argv list, or a variable holding such a
    literal. `--backend=nccl` and `--backend nccl` (also quoted) are both handled; a computed value is
    left alone. `init_process_group("nccl")` and `default="nccl"` in argparse belong to the distributed
    rules (NPU14x). Launch scripts (`*.sh`) get the same from NPU256.

    ## Example

    ```python
    # before
    subprocess.check_call(["torchrun", "--nproc_per_node=8", "train.py", "--backend", "nccl"])
    # after
    subprocess.check_call(["torchrun", "--nproc_per_node=8", "train.py", "--backend", "hccl"])
    ```

    ## Fix safety

    Safe: `hccl` is the NPU collective backend registered by torch_npu.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU206"
    name = "launch-backend-arg"
    summary = "`--backend nccl` (and `--dist-backend`, `--ddp_backend`) in subprocess commands becomes `hccl`"
    kinds = frozenset({"backend"})
    prefilter = "nccl"


CASES = [
    Invalid(
        """\
import os
import torch
subprocess.check_call(["torchrun", "--nproc_per_node=8", "train.py", "--backend", "nccl"])
""",
        after="""\
import os
import torch
subprocess.check_call(["torchrun", "--nproc_per_node=8", "train.py", "--backend", "hccl"])
""",
    ),
    Valid(
        """\
import os
import torch
subprocess.check_call(["torchrun", "--nproc_per_node=8", "train.py", "--backend", "hccl"])
""",
    ),
    Invalid(
        """\
import os
os.system("CUDA_VISIBLE_DEVICES=0,1 python train.py --backend nccl")
""",
        after="""\
import os
os.system("ASCEND_RT_VISIBLE_DEVICES=0,1 python train.py --backend hccl")
""",
        codes=('NPU201', 'NPU206'),
        with_rules=('NPU201',),
    ),
    Invalid(
        """\
import subprocess
subprocess.check_call(["env", "CUDA_VISIBLE_DEVICES=0", "torchrun", "t.py", "--backend", "nccl"])
""",
        after="""\
import subprocess
subprocess.check_call(["env", "ASCEND_RT_VISIBLE_DEVICES=0", "torchrun", "t.py", "--backend", "hccl"])
""",
        codes=('NPU201', 'NPU206'),
        with_rules=('NPU201',),
    ),
    Valid(
        """\
import subprocess
subprocess.run(["echo", "nccl"])
""",
        with_rules=('NPU201', 'NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU207'),
    ),
]

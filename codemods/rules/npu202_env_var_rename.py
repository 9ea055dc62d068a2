"""NPU202: the env-var-rename rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid, Valid
from codemods.families.env_vars import EnvVarRule


class EnvVarRename(EnvVarRule):
    """## What it does

    CUDA/NCCL variables with an exact NPU counterpart are renamed; the value is kept.

    ## Why

    These variables have a counterpart in torch_npu that takes the same values (fact sheet §3), and
    `transfer_to_npu` translates none of them:

    | CUDA / NCCL | NPU |
    |---|---|
    | `CUDA_LAUNCH_BLOCKING` | `ASCEND_LAUNCH_BLOCKING` |
    | `PYTORCH_NO_CUDA_MEMORY_CACHING` | `PYTORCH_NO_NPU_MEMORY_CACHING` |
    | `TORCH_CUDA_SANITIZER` | `TORCH_NPU_SANITIZER` |
    | `TORCH_NCCL_BLOCKING_WAIT`, `NCCL_BLOCKING_WAIT` | `TORCH_HCCL_BLOCKING_WAIT` |
    | `TORCH_NCCL_ASYNC_ERROR_HANDLING`, `NCCL_ASYNC_ERROR_HANDLING` | `TORCH_HCCL_ASYNC_ERROR_HANDLING` |
    | `TORCH_NCCL_DESYNC_DEBUG`, `NCCL_DESYNC_DEBUG` | `TORCH_HCCL_DESYNC_DEBUG` |
    | `TORCH_NCCL_ENABLE_MONITORING`, `..._HEARTBEAT_TIMEOUT_SEC`, `..._DUMP_ON_TIMEOUT`, `..._TRACE_BUFFER_SIZE`, `..._TRACE_CPP_STACK`, `..._DEBUG_INFO_TEMP_FILE`, `..._DEBUG_INFO_PIPE_FILE`, `..._COORD_CHECK_MILSEC`, `..._WAIT_TIMEOUT_DUMP_MILSEC`, `..._HIGH_PRIORITY` | the same names with `TORCH_HCCL_` |

    Other `TORCH_NCCL_*` names have no known `TORCH_HCCL_` counterpart and are reported by NPU205.
    The places covered are those of NPU201.
    The same mapping for launch scripts (`*.sh`) is rule NPU252; both read `codemods/data/env_vars.json`.

    ## Example

    ```python
    # before
    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    # after
    os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
    os.environ.setdefault("TORCH_HCCL_ASYNC_ERROR_HANDLING", "1")
    ```

    ## Fix safety

    Safe: same meaning, same values; only the name changes.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU202"
    name = "env-var-rename"
    summary = "CUDA/NCCL variables with an exact NPU counterpart are renamed (`CUDA_LAUNCH_BLOCKING`, `TORCH_NCCL_*`, ...)"
    kinds = frozenset({"rename"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
import os
import torch
os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
""",
        after="""\
import os
import torch
os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
os.environ.setdefault("TORCH_HCCL_ASYNC_ERROR_HANDLING", "1")
""",
    ),
    Valid(
        """\
import os
import torch
os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
os.environ.setdefault("TORCH_HCCL_ASYNC_ERROR_HANDLING", "1")
""",
    ),
    Invalid(
        """\
from os import getenv
g = getenv("CUDA_LAUNCH_BLOCKING")
""",
        after="""\
from os import getenv
g = getenv("ASCEND_LAUNCH_BLOCKING")
""",
    ),
    Invalid(
        """\
import os
os.putenv("CUDA_LAUNCH_BLOCKING", "1")
""",
        after="""\
import os
os.putenv("ASCEND_LAUNCH_BLOCKING", "1")
""",
    ),
    Invalid(
        """\
import os
os.environ.pop("TORCH_NCCL_BLOCKING_WAIT", None)
""",
        after="""\
import os
os.environ.pop("TORCH_HCCL_BLOCKING_WAIT", None)
""",
    ),
    Invalid(
        """\
import os
os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")
""",
        after="""\
import os
os.environ.setdefault("TORCH_HCCL_ASYNC_ERROR_HANDLING", "1")
""",
    ),
    Invalid(
        """\
import os
del os.environ["TORCH_NCCL_DESYNC_DEBUG"]
""",
        after="""\
import os
del os.environ["TORCH_HCCL_DESYNC_DEBUG"]
""",
    ),
    Invalid(
        """\
def test(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_SANITIZER", "1")
""",
        after="""\
def test(monkeypatch):
    monkeypatch.setenv("TORCH_NPU_SANITIZER", "1")
""",
    ),
    Invalid(
        """\
import os
os.environ.update(CUDA_LAUNCH_BLOCKING="1")
""",
        after="""\
import os
os.environ.update(ASCEND_LAUNCH_BLOCKING="1")
""",
    ),
    Invalid(
        """\
import os
env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
""",
        after="""\
import os
env = dict(os.environ, PYTORCH_NO_NPU_MEMORY_CACHING="1")
""",
    ),
    Invalid(
        """\
import subprocess
cmd = "export CUDA_LAUNCH_BLOCKING=1; python t.py"
subprocess.Popen(cmd, shell=True)
""",
        after="""\
import subprocess
cmd = "export ASCEND_LAUNCH_BLOCKING=1; python t.py"
subprocess.Popen(cmd, shell=True)
""",
    ),
]

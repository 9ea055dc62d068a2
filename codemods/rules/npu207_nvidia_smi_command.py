"""NPU207: the nvidia-smi-command rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class NvidiaSmiCommand(EnvVarRule):
    """## What it does

    `nvidia-smi` in commands given to subprocess is reported (diagnostic only).

    ## Why

    Ascend hosts have no `nvidia-smi`; the device tool is `npu-smi`, whose output format differs, so
    parsing code must change too. Inside Python the simplest route is to ask torch:
    `torch.npu.device_count()`, `torch.npu.mem_get_info(device)`, `torch.npu.utilization(device)`.
    Launch scripts get the same report from NPU257; NVML bindings (pynvml, GPUtil, gpustat) from NPU310.

    ## Example

    ```python
    n = len(subprocess.check_output(["nvidia-smi", "-L"]).splitlines())   # NPU207
    n = torch.npu.device_count()                                            # instead
    ```

    ## Fix safety

    No fix: diagnostic only.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU207"
    supported_targets = frozenset({"npu", "portable"})
    name = "nvidia-smi-command"
    summary = "`nvidia-smi` in subprocess commands is reported (Ascend hosts have `npu-smi`)"
    fix = Fix.NONE
    severity = Severity.WARNING
    kinds = frozenset({"nvidia_smi"})
    prefilter = r"nvidia-smi"


CASES = [
    Invalid(
        """\
import os
import torch
n = len(subprocess.check_output(["nvidia-smi", "-L"]).splitlines())
n = torch.npu.device_count()                                            # instead
""",
    ),
]

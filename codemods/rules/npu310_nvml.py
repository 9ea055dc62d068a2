"""NPU310: the nvml rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class Nvml(ThirdPartyRule):
    """## What it does

    pynvml/GPUtil/gpustat query NVIDIA's driver (NVML, nvidia-smi): use torch.npu.device_count/mem_get_info/utilization

    ## Why

    NVML (pynvml, GPUtil, gpustat) does not exist on Ascend hosts. torch answers the usual questions: `torch.npu.device_count()`, `torch.npu.mem_get_info(device)` (free, total), `torch.npu.utilization(device)`, `torch.npu.get_device_name(device)` (fact sheet §2.1). Temperature, power and clocks have no torch_npu counterpart (§2.6).

    ## Example

    ```python
    import pynvml                                                   # NPU310
    info = pynvml.nvmlDeviceGetMemoryInfo(handle)                   # NPU310

    # instead
    free, total = torch.npu.mem_get_info(device)
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU310]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU310"
    supported_targets = frozenset({"npu", "portable"})
    name = "nvml"
    summary = "pynvml/GPUtil/gpustat query NVIDIA's driver (NVML, nvidia-smi): use torch.npu.device_count/mem_get_info/utilization"
    prefilter = library_prefilter("NPU310")


CASES = [
    Invalid(
        """\
import os
import torch
import pynvml
info = pynvml.nvmlDeviceGetMemoryInfo(handle)
""",
    ),
    Valid(
        """\
import os
import torch
free, total = torch.npu.mem_get_info(device)
""",
    ),
]

"""NPU310: the nvml rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class Nvml(ThirdPartyRule):
    code = "NPU310"
    name = "nvml"
    summary = "pynvml/GPUtil/gpustat query NVIDIA's driver (NVML, nvidia-smi): use torch.npu.device_count/mem_get_info/utilization"
    prefilter = library_prefilter("NPU310")


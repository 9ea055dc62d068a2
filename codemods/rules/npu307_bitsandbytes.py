"""NPU307: the bitsandbytes rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class Bitsandbytes(ThirdPartyRule):
    code = "NPU307"
    name = "bitsandbytes"
    summary = "bitsandbytes has no NPU backend: torch.optim and fp16/bf16 layers"
    prefilter = library_prefilter("NPU307")


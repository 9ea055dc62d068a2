"""NPU307: the bitsandbytes rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class Bitsandbytes(ThirdPartyRule):
    """## What it does

    bitsandbytes has no NPU backend: torch.optim and fp16/bf16 layers

    ## Why

    bitsandbytes' 8-bit/4-bit optimizers and quantised layers are CUDA kernels with no torch_npu backend. Under `transfer_to_npu`, transformers' `is_bitsandbytes_available()` is shimmed to report False, which only hides the problem.

    ## Example

    ```python
    import bitsandbytes as bnb                            # NPU307
    opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)

    # instead
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ```

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU307]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU307"
    supported_targets = frozenset({"npu", "portable"})
    name = "bitsandbytes"
    summary = "bitsandbytes has no NPU backend: torch.optim and fp16/bf16 layers"
    prefilter = library_prefilter("NPU307")


CASES = [
    Invalid(
        """\
import os
import torch
import bitsandbytes as bnb
opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
""",
    ),
    Invalid(  # Hugging Face 8-bit/4-bit loading goes through bitsandbytes without importing it
        """\
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig
model = AutoModelForCausalLM.from_pretrained(name, load_in_8bit=load_8bit, device_map="auto")
config = BitsAndBytesConfig(load_in_4bit=True)
""",
    ),
    Invalid(  # litgpt: `--quantize bnb.nf4` selects Lightning's bitsandbytes plugin
        """\
import torch
from lightning.fabric.plugins import BitsandbytesPrecision
plugins = BitsandbytesPrecision(quantize[4:], dtype)
""",
    ),
    Valid(
        """\
import os
import torch
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = AutoModelForCausalLM.from_pretrained(name, load_in_8bit=False, device_map={"": "cpu"})
""",
    ),
]

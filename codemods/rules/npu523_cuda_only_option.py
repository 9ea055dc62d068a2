"""NPU523: the cuda-only-option rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.options import OptionRule, option_prefilter


class CudaOnlyOption(OptionRule):
    """## What it does

    Option values that select CUDA-only code (`optim="paged_adamw_32bit"` and the other bitsandbytes optimizers, `attn_implementation="flash_attention_2"`, `quantize="bnb.nf4"`, `RWKV(..., strategy="cuda fp16")`) are reported with the exact reason, or rewritten where an NPU value does the same (`optim="adamw_apex_fused"` → `"adamw_torch_npu_fused"`, `half_precision_backend="apex"` → `"auto"`)

    ## Why

    These are strings, not imports: nothing else in the code says that they make a framework load a CUDA-only library, so the migrated program fails when it starts training (Hugging Face's Trainer creating a bitsandbytes optimizer), when it loads the model, or at once (rwkv refuses any device but `cuda`, `cpu` and `mps`). Each entry of the catalogue (`codemods/data/cuda_only.json`, kind `option`) names the option, the values, its status per torch_npu release and its route: an error where nothing on NPU does it, a warning with the NPU counterpart where one exists, a rewrite where the framework itself has an NPU value for it (transformers' `adamw_torch_npu_fused` is `torch_npu.optim.NpuFusedAdamW`). The option is found as a keyword argument, a dict key, a dataclass field or an argparse default (`optim: str = field(default="paged_adamw_32bit")` in QLoRA's training script); launch scripts are NPU258, YAML configs NPU541.

    ## Example

    ```python
    # before
    args = TrainingArguments(output_dir="o", optim="adamw_apex_fused")
    args = TrainingArguments(output_dir="o", optim="paged_adamw_32bit")   # NPU523 (error)
    # after
    args = TrainingArguments(output_dir="o", optim="adamw_torch_npu_fused")
    args = TrainingArguments(output_dir="o", optim="paged_adamw_32bit")   # reported: use "adamw_torch"
    ```

    ## Fix safety

    Safe where it rewrites: the NPU value selects the same algorithm with the same hyper-parameters. Reported values are left as written. Suppress with `# npu-migrate: ignore[NPU523]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet (the rewrite names torch_npu's values; under `--target portable` it is reported instead)
    """

    code = "NPU523"
    supported_targets = frozenset({"npu"})
    name = "cuda-only-option"
    summary = "Option values that select CUDA-only code (bitsandbytes optimizers, flash-attn, rwkv's cuda strategy) are reported or rewritten"
    prefilter = option_prefilter("NPU523")


CASES = [
    Invalid(  # QLoRA's training script: a dataclass field feeding HfArgumentParser
        """\
from dataclasses import dataclass, field
import transformers


@dataclass
class TrainingArguments(transformers.Seq2SeqTrainingArguments):
    optim: str = field(default='paged_adamw_32bit', metadata={"help": 'The optimizer to be used'})
""",
        codes=("NPU523",),
    ),
    Invalid(
        """\
from transformers import AutoModelForCausalLM, TrainingArguments
args = TrainingArguments(output_dir="o", optim="adamw_apex_fused", half_precision_backend="apex")
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")
""",
        after="""\
from transformers import AutoModelForCausalLM, TrainingArguments
args = TrainingArguments(output_dir="o", optim="adamw_torch_npu_fused", half_precision_backend="auto")
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")
""",
    ),
    Invalid(  # the rwkv package: its strategy string accepts no NPU device
        """\
from rwkv.model import RWKV
model = RWKV(model="RWKV-4-Pile-169M", strategy="cuda fp16")
model = RWKV("RWKV-4-Pile-169M", "cuda fp16i8 *10 -> cpu fp32")
""",
        codes=("NPU523",),
    ),
    Valid(  # values that run on NPU, a computed value, the same word as text
        """\
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", optim="adamw_torch", attn_implementation="sdpa")
args = TrainingArguments(output_dir="o", optim=choice)
print("optim", "paged_adamw_32bit")
strategy = "cuda fp16"
""",
    ),
]

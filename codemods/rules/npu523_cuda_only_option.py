"""NPU523: the cuda-only-option rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.options import OptionRule, option_prefilter


class CudaOnlyOption(OptionRule):
    """## What it does

    Option values that select CUDA-only code (`optim="paged_adamw_32bit"` and the other bitsandbytes optimizers, `quantize="bnb.nf4"`, `RWKV(..., strategy="cuda fp16")`) are reported with the exact reason, or rewritten where an NPU value does the same (`optim="adamw_apex_fused"` → `"adamw_torch_npu_fused"`, `half_precision_backend="apex"` → `"auto"`, `attn_implementation="flash_attention_2"` → `"sdpa"` in a call, a config's `_attn_implementation`, a dataclass field or an argparse default, and the older `use_flash_attention_2=True` → `attn_implementation="sdpa"` as a keyword or a dict key). A comparison with the value (`if config._attn_implementation == "flash_attention_2":`) and text that merely names it stay

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

    Safe where it rewrites: the NPU value selects the same algorithm with the same hyper-parameters. Unsafe for `attn_implementation` (`flash_attention_2` → `sdpa`; the catalogue entry says `"fix": "unsafe"` and the edit's message says so): without packing it is the same attention in another kernel (padding masks, causal masking and dropout are transformers' own on both paths), but a batch packed without padding (TRL's `padding_free`, `DataCollatorWithFlattening`) is split into sequences by position_ids only on the flash-attention path, so SDPA would attend across them on a transformers that does not detect packing itself; with transformers 4.56 or newer, which runs `flash_attention_2` on Ascend through torch_npu.npu_fusion_attention, you may keep the value (suppress the line). A file that sets `padding_free` or `packing` true (the catalogue entry's `kept_with`) keeps `flash_attention_2` and is told why instead. A model class that does not declare SDPA support (custom modeling code without `_supports_sdpa`) makes transformers raise at load with `sdpa`: write `"eager"` there. Reported values are left as written. Suppress with `# npu-migrate: ignore[NPU523]`.

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
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation="sdpa")
""",
    ),
    Invalid(  # flash_attention_2 wherever it reaches transformers: a config, its private field, a dataclass
        # default, an argparse default, the older keyword (renamed) in a call and a dict; the
        # choices offered are reported, the comparison stays
        """\
from dataclasses import dataclass, field
from transformers import AutoConfig, AutoModelForCausalLM
config = AutoConfig.from_pretrained("m", attn_implementation="flash_attention_2")
config._attn_implementation = "flash_attention_2"
model_kwargs = dict(torch_dtype="auto", use_flash_attention_2=True)
legacy = {"use_flash_attention_2": True, "device_map": "auto"}
parser.add_argument("--attn_implementation", default="flash_attention_2", choices=["sdpa", "flash_attention_2"])

@dataclass
class ModelArguments:
    attn_implementation: str = field(default="flash_attention_2")

if config._attn_implementation == "flash_attention_2":
    print("attn_implementation=flash_attention_2")
""",
        after="""\
from dataclasses import dataclass, field
from transformers import AutoConfig, AutoModelForCausalLM
config = AutoConfig.from_pretrained("m", attn_implementation="sdpa")
config._attn_implementation = "sdpa"
model_kwargs = dict(torch_dtype="auto", attn_implementation="sdpa")
legacy = {"attn_implementation": "sdpa", "device_map": "auto"}
parser.add_argument("--attn_implementation", default="sdpa", choices=["sdpa", "flash_attention_2"])

@dataclass
class ModelArguments:
    attn_implementation: str = field(default="sdpa")

if config._attn_implementation == "flash_attention_2":
    print("attn_implementation=flash_attention_2")
""",
        lines=(7,),  # the choices; the rewrites are edits
    ),
    Invalid(  # TRL packing without padding needs the flash-attention path: kept, reported with the reason
        """\
from transformers import AutoModelForCausalLM
from trl import SFTConfig
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")
config = SFTConfig(output_dir="o", padding_free=True)
""",
        lines=(3,),
    ),
    Invalid(  # both spellings in one call: the older one is reported (renaming it would repeat a keyword)
        """\
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("m", use_flash_attention_2=True, attn_implementation="sdpa")
""",
        lines=(2,),
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
ATTENTION_CLASSES = {"flash_attention_2": "FlashAttention2", "sdpa": "SdpaAttention"}
model = AutoModelForCausalLM.from_pretrained("m", use_flash_attention_2=False, attn_implementation=impl)
logger.warning("use_flash_attention_2=True is deprecated, use attn_implementation='flash_attention_2'")
""",
    ),
]

"""NPU258: the shell-cuda-only-option rule."""

from __future__ import annotations

import re
from codemods.api.cases import Invalid, Valid
from codemods.data import catalogue
from codemods.families.shell import ShellRule
from codemods.model.shellwords import LineIndex, Word, lex
from npu_migrate.core.diagnostics import Severity

_TRUE = "True"  # what a bare boolean flag (`--tf32`) means to Hugging Face's argument parser


def _flag_value(words: list[Word], literals: list[str | None], i: int) -> tuple[str, str, int, int, bool] | None:
    """(flag, value, value start, value end, editable) for `--flag value` / `--flag=value` at word
    i; a flag followed by another flag or nothing is a bare boolean flag (value "True", spliced in
    after it)."""
    literal = literals[i]
    if literal is None or not literal.startswith("--"):
        return None
    word = words[i]
    flag, equals, value = literal.partition("=")
    if equals:
        last = word.segments[-1]
        return flag, value, last.end - len(value), last.end, len(word.segments) == 1 or last.end - last.start == len(value)
    following = literals[i + 1] if i + 1 < len(words) else ""
    if following is None:
        return None  # a value the shell computes
    if following.startswith("-") or following == "":
        return flag, _TRUE, word.end, word.end, True
    nxt = words[i + 1]
    return flag, following, nxt.segments[0].start, nxt.segments[-1].end, len(nxt.segments) == 1


class ShellCudaOnlyOption(ShellRule):
    r"""## What it does

    Launch scripts: flag values that select CUDA-only code or a CUDA device (`--tf32 True`, `--device cuda`, `--optim paged_adamw_32bit`, `--attn_implementation flash_attention_2`, `--quantize bnb.nf4`) and commands that need NVIDIA's toolkit (`module load cuda/11.7`, `nvcc`) are rewritten where an NPU value does the same and reported otherwise

    ## Why

    The training script's own code may be migrated while its launch script still passes what makes it stop on an Ascend host: Hugging Face's `TrainingArguments` raises at start-up for `--tf32 True` (no Ampere GPU), the Trainer builds a bitsandbytes optimizer for `--optim paged_adamw_32bit`. The flags and values are the catalogue's option entries (`codemods/data/cuda_only.json`, their `flags`), the same facts NPU523 applies to Python code and NPU541 to YAML configs. `--tf32 True` (or a bare `--tf32`) becomes `--tf32 False`, which runs everywhere; the NPU's counterpart, HF32, has no command-line switch, so the message says to set `torch.npu.matmul.allow_hf32 = True` in the training script. `--optim adamw_apex_fused` becomes `adamw_torch_npu_fused` and `--half_precision_backend apex` becomes `auto`, `--attn_implementation flash_attention_2` becomes `sdpa`, `--device cuda[:N]` becomes `npu[:N]`. Values without an NPU route are errors with the exact reason. Values the shell computes (`--optim $OPTIM`) are left alone. The scan is the shell rules' own word reader: never comments, single-quoted text or `echo` arguments.

    ## Example

    ```bash
    # before
    torchrun --nproc_per_node=8 train.py --bf16 True --tf32 True --optim adamw_apex_fused
    # after
    torchrun --nproc_per_node=8 train.py --bf16 True --tf32 False --optim adamw_torch_npu_fused
    ```

    ## Fix safety

    Safe: `--tf32 False` is what TF32 amounts to on a machine without it (transformers then leaves the matmul precision alone), and the rewritten values select the same algorithm on the NPU. Unsafe for `attn_implementation` (`flash_attention_2` → `sdpa`; the catalogue entry says `"fix": "unsafe"` and the edit's message says so): without packing it is the same attention in another kernel (padding masks, causal masking and dropout are transformers' own on both paths), but a batch packed without padding (TRL's `padding_free`, `DataCollatorWithFlattening`) is split into sequences by position_ids only on the flash-attention path, so SDPA would attend across them on a transformers that does not detect packing itself; with transformers 4.56 or newer, which runs `flash_attention_2` on Ascend through torch_npu.npu_fusion_attention, you may keep the value (suppress the line). A file that sets `padding_free` or `packing` true (the catalogue entry's `kept_with`) keeps `flash_attention_2` and is told why instead. Suppress with `# npu-migrate: ignore[NPU258]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU258"
    name = "shell-cuda-only-option"
    summary = "Launch scripts: flag values that select CUDA-only code or a CUDA device (`--tf32 True`, `--device cuda`, `--optim paged_adamw_32bit`) and CUDA toolkit commands"
    prefilter = "|".join([catalogue.words(catalogue.option_words("flag"))]
                         + [entry["pattern"] for entry in catalogue.commands()])

    def rewrite_text(self, text: str) -> str:
        index = LineIndex(text)
        edits: list[tuple[int, int, str]] = []
        for words in lex(text):
            literals = [w.literal(text) for w in words]
            if literals and literals[0] in ("echo", "printf"):
                continue
            self._command(text, words, literals, index)
            for i in range(len(words)):
                found = _flag_value(words, literals, i)
                if found is not None:
                    edits += self._flag(found, index, words[i].start)
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def _flag(self, found: tuple[str, str, int, int, bool], index: LineIndex, at: int) -> list[tuple[int, int, str]]:
        flag, value, start, end, editable = found
        entry = catalogue.option_entry(flag, value, "flag")
        if entry is None:
            return []
        line, col = index.position(at)
        replacement = entry.get("replacement")
        kept = catalogue.kept_because(entry, self.context.source)
        if entry["action"] == "rewrite" and replacement is not None and editable and kept is None:
            if self.context.suppressions.suppresses(self.code, line):
                return []
            route = catalogue.option_message(entry, flag, value) + (" (set `torch.npu.matmul.allow_hf32 = True` in the training script: HF32 has "
                                        "no command-line switch)" if entry.get("code") == "NPU524" else "")
            if entry.get("option") == "device":
                replacement = re.sub(r"^cuda", replacement, value)  # `--device cuda:1` -> `--device npu:1`
            self.fixed_at(line, col, f"`{flag} {value}` → `{flag} {replacement}`{catalogue.fix_note(entry)}: {route}")
            return [(start, end, replacement if start != end else f" {replacement}")]
        self.report_at(line, col, catalogue.option_message(entry, flag, value) + (f" ({kept})" if kept else ""),
                       Severity(entry.get("severity", "warning")))
        return []

    def _command(self, text: str, words: list[Word], literals: list[str | None], index: LineIndex) -> None:
        spelled = " ".join(lit for lit in literals if lit is not None)
        for entry in catalogue.commands():
            found = re.search(entry["pattern"], spelled)
            if found is not None:
                line, col = index.position(words[0].start)
                self.report_at(line, col, entry["message"].format(value=found.group(0)),
                               Severity(entry.get("severity", "warning")))


CASES = [
    Invalid(  # a QLoRA launch script
        """\
python qlora.py \\
    --model_name_or_path huggyllama/llama-7b \\
    --bf16 \\
    --tf32 True \\
    --optim paged_adamw_32bit \\
    --attn_implementation=flash_attention_2
""",
        after="""\
python qlora.py \\
    --model_name_or_path huggyllama/llama-7b \\
    --bf16 \\
    --tf32 False \\
    --optim paged_adamw_32bit \\
    --attn_implementation=sdpa
""",
        path="finetune.sh",
    ),
    Invalid(  # packing without padding needs the flash-attention path: kept, reported with the reason
        """\
accelerate launch sft.py --attn_implementation flash_attention_2 --packing
""",
        path="sft.sh",
        lines=(1,),
    ),
    Invalid(  # a bare boolean flag, and a cluster script loading NVIDIA's toolkit
        """\
module load cuda/11.7
torchrun train.py --tf32 --optim adamw_apex_fused
""",
        after="""\
module load cuda/11.7
torchrun train.py --tf32 False --optim adamw_torch_npu_fused
""",
        path="job.sh",
    ),
    Invalid(  # llm.c's dev/eval/run_eval.sh: an evaluation run on the CUDA device
        """\
python main.py --model hf-causal-experimental --tasks winogrande --device cuda --num_fewshot 5
python sample.py --device=cuda:1
""",
        after="""\
python main.py --model hf-causal-experimental --tasks winogrande --device npu --num_fewshot 5
python sample.py --device=npu:1
""",
        path="run_eval.sh",
    ),
    Valid(
        """\
python main.py --device cpu --device-map auto --device "$DEVICE"
python train.py --attn_implementation sdpa --attn_implementation "$ATTN"
echo "--attn_implementation flash_attention_2 needs flash-attn"
""",
        path="eval.sh",
    ),
    Valid(
        """\
# --tf32 True is what the paper used
echo "--optim paged_adamw_32bit"
torchrun train.py --tf32 False --optim adamw_torch --optim_args $ARGS --optim "$OPTIM"
""",
        path="run.sh",
    ),
]

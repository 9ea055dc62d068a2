"""NPU541: the cuda-only-config rule."""

from __future__ import annotations

import re

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.data import catalogue
from npu_migrate.core.diagnostics import Severity

# `key: value` (a mapping entry, also as a list item), the value a plain or quoted scalar, a
# comment after it; anything else on a line (flow mappings, multi-line scalars) is left alone
_ENTRY = re.compile(r"""^(?P<lead>\s*(?:-\s+)?)(?P<quote>["']?)(?P<key>[\w.-]+)(?P=quote)\s*:[ \t]+"""
                    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s#'"][^#\n]*?)\s*(?:\s#.*)?$""")
_BOOLEANS = {"true": "True", "yes": "True", "on": "True", "false": "False", "no": "False", "off": "False"}


# CI pipelines: their `device: cuda` picks a runner or an image to build, not a device the program uses
_CI_FILE = re.compile(r"(?:^|/)(?:\.github/workflows/[^/]+|\.gitlab-ci\.ya?ml|\.circleci/[^/]+|azure-pipelines\.ya?ml"
                      r"|\.pre-commit-config\.ya?ml|\.buildkite/[^/]+)$")


def _scalar(text: str) -> tuple[str, int, int]:
    """(value, start, end of the part to replace) of a YAML scalar as written."""
    if text[:1] in "\"'":
        return text[1:-1], 1, len(text) - 1
    return text, 0, len(text)


def _as_written(replacement: str, original: str) -> str:
    """A boolean replacement spelled as the file spells booleans (`false` for `true`)."""
    if replacement in ("True", "False") and original.islower():
        return replacement.lower()
    return replacement


class CudaOnlyConfig(Rule):
    """## What it does

    YAML configs (Hydra, Hugging Face, LitGPT, Lightning): keys whose values select CUDA-only code or name a CUDA device or backend (`tf32: true`, `optim: paged_adamw_32bit`, `attn_implementation: flash_attention_2`, `quantize: bnb.nf4`, `accelerator: gpu`, `device: cuda`, `dist_backend: nccl`) are rewritten where an NPU value does the same and reported otherwise

    ## Why

    Configs carry the same switches as the code and the launch scripts, and the migrated program reads them at start-up: a `tf32: true` in a Hugging Face config makes `TrainingArguments` raise on an Ascend host, a `quantize: bnb.nf4` in a LitGPT config makes it load bitsandbytes, a `device: cuda` sends the tensors where there is no device. The keys and values are the catalogue's (`codemods/data/cuda_only.json`, the option entries' `config_keys`): the same facts NPU523 applies to Python and NPU258 to launch scripts. Rewrites: `tf32: true` → `false` (set `torch.npu.matmul.allow_hf32 = True` in the code for HF32), `optim: adamw_apex_fused` → `adamw_torch_npu_fused`, `half_precision_backend: apex` → `auto`, `attn_implementation: flash_attention_2` → `sdpa`, `device: cuda[:N]` → `npu[:N]`, a backend `nccl` → `hccl`. Discovery hands this rule every YAML file that is not a requirements or conda environment file (those are NPU315's); each line is read on its own (`key: value`, also as a list item; comments kept), so no YAML library is needed and every other byte stays as it was. CI pipelines (`.github/workflows/`, `.gitlab-ci.yml`, CircleCI, Azure, Buildkite, pre-commit) are not the program's configs: their `device: cuda` picks a runner or the Docker image to build, and they are left alone.

    ## Example

    ```yaml
    # before (a LitGPT / Hugging Face style config)
    tf32: true
    optim: adamw_apex_fused
    device: cuda:0
    quantize: bnb.nf4      # NPU541 (error): bitsandbytes
    # after
    tf32: false
    optim: adamw_torch_npu_fused
    device: npu:0
    quantize: bnb.nf4
    ```

    ## Fix safety

    Safe: each rewritten value selects on the NPU what the CUDA one selected on a GPU. Unsafe for `attn_implementation` (`flash_attention_2` → `sdpa`; the catalogue entry says `"fix": "unsafe"` and the edit's message says so): without packing it is the same attention in another kernel (padding masks, causal masking and dropout are transformers' own on both paths), but a batch packed without padding (TRL's `padding_free`, `DataCollatorWithFlattening`) is split into sequences by position_ids only on the flash-attention path, so SDPA would attend across them on a transformers that does not detect packing itself; with transformers 4.56 or newer, which runs `flash_attention_2` on Ascend through torch_npu.npu_fusion_attention, you may keep the value (suppress the line). A file that sets `padding_free` or `packing` true (the catalogue entry's `kept_with`) keeps `flash_attention_2` and is told why instead. Suppress a line with `# npu-migrate: ignore[NPU541]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU541"
    name = "cuda-only-config"
    summary = "YAML configs: values that select CUDA-only code or a CUDA device/backend (`tf32: true`, `optim: paged_adamw_32bit`)"
    fix = Fix.SAFE
    severity = Severity.WARNING
    language = "config"
    prefilter = catalogue.words(catalogue.option_words("config"))

    def rewrite_text(self, text: str) -> str:
        if _CI_FILE.search(self.context.path.replace("\\", "/")):
            return text
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines, 1):
            found = _ENTRY.match(line.rstrip("\r\n"))
            if found is not None:
                lines[number - 1] = self._entry(number, line, found)
        return "".join(lines)

    def _entry(self, number: int, line: str, found: re.Match[str]) -> str:
        key = found.group("key")
        value, start, end = _scalar(found.group("value"))
        entry = catalogue.option_entry(key, _BOOLEANS.get(value.lower(), value), "config")
        if entry is None:
            return line
        col = found.start("key") + 1
        replacement = entry.get("replacement")
        kept = catalogue.kept_because(entry, self.context.source)
        if entry["action"] != "rewrite" or replacement is None or kept is not None:
            self.report_at(number, col, catalogue.option_message(entry, key, value) + (f" ({kept})" if kept else ""),
                           Severity(entry.get("severity", "warning")))
            return line
        if self.context.suppressions.suppresses(self.code, number):
            return line
        new = _as_written(replacement, value)
        if key in entry.get("config_keys", ()) and entry.get("option") == "device":
            new = re.sub(r"^cuda", replacement, value)  # `cuda:1` -> `npu:1`
        self.fixed_at(number, col, f"`{key}: {value}` → `{key}: {new}`{catalogue.fix_note(entry)}: "
                                   + catalogue.option_message(entry, key, value))
        at = found.start("value")
        return line[:at + start] + new + line[at + end:]


CASES = [
    Valid(  # LLaMA-Factory's .github/workflows/docker.yml: the image a CI job builds
        """\
        jobs:
          build:
            strategy:
              matrix:
                include:
                  - device: "cuda"
        """,
        path=".github/workflows/docker.yml",
    ),
    Invalid(
        """\
model_name: llama
tf32: true
optim: adamw_apex_fused   # fused AdamW
trainer:
  device: "cuda:0"
  dist_backend: nccl
quantize: bnb.nf4
""",
        after="""\
model_name: llama
tf32: false
optim: adamw_torch_npu_fused   # fused AdamW
trainer:
  device: "npu:0"
  dist_backend: hccl
quantize: bnb.nf4
""",
        path="config.yaml",
    ),
    Invalid(  # alignment-handbook's recipes: the model's attention; a comment and other keys stay
        """\
model_name_or_path: HuggingFaceTB/SmolLM3-3B-Base
torch_dtype: bfloat16
attn_implementation: flash_attention_2   # as in the paper
note: "attn_implementation: flash_attention_2"
""",
        after="""\
model_name_or_path: HuggingFaceTB/SmolLM3-3B-Base
torch_dtype: bfloat16
attn_implementation: sdpa   # as in the paper
note: "attn_implementation: flash_attention_2"
""",
        path="recipes/smollm3/sft/sft.yaml",
    ),
    Invalid(  # alignment-handbook's smollm3 APO recipe packs without padding: flash_attention_2 stays, reported
        """\
attn_implementation: flash_attention_2
padding_free: true
""",
        path="recipes/smollm3/dpo/apo.yaml",
        lines=(1,),
    ),
    Invalid(  # lightning-hydra-template's configs/trainer/gpu.yaml
        """\
defaults:
  - default

accelerator: gpu
devices: 1
""",
        path="configs/trainer/gpu.yaml",
    ),
    Valid(
        """\
# tf32: true would be faster on an A100
accelerator: cpu
device: npu
optim: adamw_torch
description: "optim: paged_adamw_32bit"
""",
        path="config.yaml",
    ),
]

"""No silent miss: `npu-migrate apply` on real public projects, pinned commits.

For each project (a local clone at the pinned commit under --corpus; absent or moved clones are
skipped with a line saying so) this runs `python -m npu_migrate apply --output-dir COPY
--format json --no-cache` once per --repeat and prints:

- sites: CUDA-specific constructs in the original Python code (and notebook code cells),
- rewritten: sites no longer in the migrated code,
- reported: sites still there, on a statement some diagnostic names (any code),
- silent: sites still there that no diagnostic names -- the number that must be 0,
- CUDA-only guards: tests that decide whether CUDA-only code runs (an `if` on CUDA whose branch, or
  for an early-return gate the code after it, imports a CUDA-only library or kernel language,
  names `.cu` sources or calls the file's functions that do; a conjunction with such an operand),
- sent to NPU: those whose CUDA test the migration turned into an NPU test -- must be 0,
- time: median wall time of the apply process (start-up included).

The sites are found by a scanner of this script's own (`tokenize`, not the rules' `ast` scan
that the final sweep NPU599 uses), so the count does not grade the tool with its own ruler. Since
issue 25 the definition is wide: besides device strings, `torch.cuda`, CUDA-only imports and
environment variables it counts option strings that select CUDA-only code (bitsandbytes optimizer
names, `flash_attention_2`, `bnb.nf4`, rwkv's `cuda fp16` strategies, `tf32=True`), kernel languages
and engines (TileLang, CuTe DSL, cuda-python, LightLLM, ExLlamaV2, ...), and the CUDA lines of
launch scripts (`.sh`, notebook `!` lines), YAML configs and requirements/conda files.
`--list-silent` prints every silent site; `--hunks N` writes a seeded sample of N changed hunks
to review (bench/hunk_review.md keeps the reviewed list).

Then every migrated entry point (a changed script with an `if __name__ == "__main__":` block or a
train/main-like name; not tests) is imported, not run, under `python -m npu_migrate.emulation`
(bench/emulated_import.py, one process each, --import-timeout seconds; third-party packages not
installed here are stubbed) and classified: ok, ok with stubs, failing the same way without the
migration (the original imported with plain python and the same stubs), or ours. `--no-imports` skips this; `--list-imports` prints every verdict.

    python bench/no_silent_miss.py [--corpus /work/corpus] [--repeat 3] [--list-silent]
                                   [--baseline OTHER_CHECKOUT] [--hunks 220]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
from collections.abc import Iterator
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (folder under --corpus, owner/name, pinned commit, why it is here)
PROJECTS = [
    ("karpathy+nanoGPT", "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "LLM training, DDP"),
    ("pytorch+examples", "pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8", "many small trainers"),
    ("karpathy+minGPT", "karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", "LLM, notebooks"),
    ("openai+CLIP", "openai/CLIP", "d05afc436d78f1c48dc0dbf8e5980a9d471f35f6", "CLIP, notebooks"),
    ("ultralytics+yolov5", "ultralytics/yolov5", "5081342f04fb287fc2e5f2b5a4e06752b7937b1c",
     "detection, select_device(), notebooks"),
    ("facebookresearch+detr", "facebookresearch/detr", "29901c51d7fe8712168b8d0d64351170bc0f83e0", "detection"),
    ("lucidrains+vit-pytorch", "lucidrains/vit-pytorch", "69d24fe9e3024c0d4b02761123b8583a24ebed1e", "ViT"),
    ("huggingface+pytorch-image-models", "huggingface/pytorch-image-models",
     "aa4b5850c1543fa488abf260f18390eda46cf85d", "timm: ViT/CNN zoo, tests"),
    ("ashleve+lightning-hydra-template", "ashleve/lightning-hydra-template",
     "bddbc24b82ab6ccfa6243e815a49dc5bfe8d4144", "Lightning project"),
    ("Lightning-AI+pytorch-lightning", "Lightning-AI/pytorch-lightning",
     "7f0c3436cd3f6ad3753125672024fc415cbcb414", "Lightning itself; tests mock CUDA"),
    # added after the round's merges, untuned: tried as a new user would, then kept
    ("facebookresearch+dinov2", "facebookresearch/dinov2", "b8931f7bf91576930313be2c6d6af376033b35f0",
     "self-supervised ViT, xFormers, distributed, notebooks"),
    ("openai+whisper", "openai/whisper", "c0d2f624c09dc18e709e37c2ad90c039a4eb72a2",
     "speech; Triton kernels behind is_cuda guards, CUDA-marked tests, notebooks"),
    ("lucidrains+denoising-diffusion-pytorch", "lucidrains/denoising-diffusion-pytorch",
     "faed4db28e724735323fa91c70aa9b28a6e1cbac", "diffusion, AMP decorators, device properties"),
    # added 2026-11-26, untuned: each tried as a new user would, every hunk and every CUDA line left
    # read, the misses fixed, then kept here
    ("Lightning-AI+litgpt", "Lightning-AI/litgpt", "26857050fe3ff627cd714fe92f5838f51a3d5efa",
     "Fabric LLM training, bitsandbytes, Triton kernels, tests that mock CUDA"),
    ("tloen+alpaca-lora", "tloen/alpaca-lora", "8bb8579e403dc78e37fe81ffbb253c413007323f",
     "HF transformers/peft, load_in_8bit, device_map, notebook"),
    ("tatsu-lab+stanford_alpaca", "tatsu-lab/stanford_alpaca", "761dc5bfbdeeffa89b8bff5d038781a4055f796a",
     "HF Trainer, a DeepSpeed JSON config"),
    ("meta-llama+llama", "meta-llama/llama", "689c7f261b9c5514636ecc3c5fefefcbb3e6eed7",
     "fairscale model parallel, nccl, torchrun"),
    ("lllyasviel+ControlNet", "lllyasviel/ControlNet", "ed85cd1e25a5ed592f7d8178495b4483de0331bf",
     "Lightning 1.x, vendored mmcv with CUDA extensions"),
    ("facebookresearch+mae", "facebookresearch/mae", "efb2a8062c206524e35e47d04501ed4f544c0ae8",
     "DDP, AMP, notebook"),
    ("mlfoundations+open_clip", "mlfoundations/open_clip", "89fb801f1e6087880e951fc8354b8a2077b79c6d",
     "distributed training, AMP, tests, notebooks"),
    ("facebookresearch+segment-anything", "facebookresearch/segment-anything",
     "dca509fe793f601edb92606367a655c15ac00fdf", "notebooks, ONNX export and runtime"),
    ("karpathy+nanochat", "karpathy/nanochat", "92d63d4e8bb4df75c3b71618f31ddde2378b2bcd",
     "LLM training, device-type detection, FA3 through the kernels hub, notebooks"),
    ("CompVis+latent-diffusion", "CompVis/latent-diffusion", "a506df5756472e2ebaf9078affdde2c4f1502cd4",
     "Lightning 1.x, device defaults in parameters, notebook"),
    ("facebookresearch+DiT", "facebookresearch/DiT", "ed81ce2229091fd4ecc9a223645f95cf379d582b",
     "DDP, tf32 flags, notebook"),
    ("microsoft+Swin-Transformer", "microsoft/Swin-Transformer", "f82860bfb5225915aca09c3227159ee9e1df874d",
     "apex amp, fused CUDA kernels, nccl"),
    ("facebookresearch+ConvNeXt", "facebookresearch/ConvNeXt", "048efcea897d999aed302f2639b6270aedf8d4c8",
     "timm, DDP, AMP, submitit"),
    # added for issue 25, untuned: a QLoRA fine-tuning repo with launch scripts, a GAN whose ops pick
    # JIT-built CUDA plugins over reference code, a CuTe DSL kernel library
    ("artidoro+qlora", "artidoro/qlora", "7f4e95a68dc076bea9b3a413d2b512eca6d004e5",
     "QLoRA: bitsandbytes, paged optimizers, launch scripts"),
    ("NVlabs+stylegan3", "NVlabs/stylegan3", "c233a919a6faee6e36a316ddd4eddababad1adf9",
     "GAN, impl='cuda' selectors in front of JIT-built .cu plugins"),
    ("Dao-AILab+quack", "Dao-AILab/quack", "c8ec3170057987da0ec99883736f381ea1937cf3",
     "CuTe DSL (cutlass.cute) kernels, cuda-python, torch.library ops"),
]

# -- the independent scanner ---------------------------------------------------------------------
_DEVICE = re.compile(r"cuda(:\d*)?|cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis]|\{[^{}]*\})")
_ENV = re.compile(r"(CUDA|NCCL|CUDNN|CUBLAS|NVIDIA)_[A-Z0-9_]+|(PYTORCH|TORCH)_(CUDA|NCCL)_[A-Z0-9_]+")
_LIBRARIES = {"apex", "tensorrt", "torch_tensorrt", "pycuda", "cupy", "cupyx", "bitsandbytes", "xformers",
              "flash_attn", "triton", "pynvml", "GPUtil", "gpustat", "transformer_engine",
              # the wide definition (issue 25): kernel languages, engines, more CUDA-only libraries
              "tilelang", "cutlass", "lightllm", "exllamav2", "exllama", "tensorrt_llm", "flashinfer", "mamba_ssm",
              "causal_conv1d", "tinycudann", "cudf", "cuml", "liger_kernel", "unsloth", "helion", "tutel"}
_KERNEL_MODULES = re.compile(r"cuda\.(bindings|core|cuda|cudart|nvrtc)\b|numba\.cuda\b|vllm\._C\b|vllm\._custom_ops\b")
# option values that select CUDA-only code, spelled as strings (keywords, dict values, fields, defaults)
_OPTION_VALUES = re.compile(r"paged_(adamw|lion|ademamix)_(8|32)bit|adamw_bnb_8bit|adamw_8bit|ademamix_8bit|lion_(8|32)bit"
                            r"|rmsprop_bnb(_8bit|_32bit)?|adamw_apex_fused|flash_attention_[23]|bnb\.(nf4|fp4|int8)[\w-]*"
                            r"|RWKV_CUDA_ON|cuda (fp16|fp32|bf16)\w*.*")
_TEXT_CALLS = {"print", "debug", "info", "warning", "warn", "error", "critical", "exception", "log",
               "write", "echo", "secho", "fail", "skip", "format_exc"}
_TEXT_KEYWORDS = {"help", "msg", "message", "description", "reason", "desc", "title", "label"}
_CUDA_WORD = re.compile(r"(?i)cudnn|nccl|cublas")
_CUDA_CLASS = re.compile(r"CUDA[A-Z][A-Za-z]*|CUDA_HOME|Cuda[A-Z]\w*")


@dataclass(frozen=True)
class Site:
    line: int
    what: str


def _string_value(token: str) -> str | None:
    prefix = re.match(r"[A-Za-z]*", token).group(0).lower()
    if "b" in prefix:
        return None
    if "f" in prefix:
        body = token[len(prefix):]
        quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
        inner = body[len(quote):-len(quote)]
        return inner.split("{", 1)[0] + ("{}" if "{" in inner else "")
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def scan(text: str) -> list[Site]:
    """CUDA-specific constructs of Python code, by tokens: never comments, never a string that is
    a statement of its own (docstrings), never print/log/help text."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    sites: list[Site] = []
    calls: list[str] = []  # the name before each open bracket
    # the project's own functions and classes are not CUDA constructs, whatever their names say
    # (`def is_cudnn_snafu`, `class CudaModule`): what their bodies do is scanned
    own = set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", text, re.MULTILINE)) | PROJECT_NAMES
    opening = ""  # the first token of the current statement
    for i, tok in enumerate(tokens):
        before = tokens[i - 1] if i else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if before is None or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) \
                or before.string == ";":
            opening = tok.string
        if tok.type == tokenize.OP and tok.string in "([{":
            calls.append(before.string if before is not None and before.type == tokenize.NAME else "")
            continue
        if tok.type == tokenize.OP and tok.string in ")]}":
            if calls:
                calls.pop()
            continue
        line = tok.start[0]
        dotted = before is not None and before.string == "."
        if tok.type == tokenize.NAME and tok.string in own:
            continue
        if tok.type == tokenize.NAME:
            name = tok.string
            if name in ("import", "from") and after is not None and after.type == tokenize.NAME \
                    and (name == "from" or opening == "import") and (
                        after.string in _LIBRARIES or _KERNEL_MODULES.match(_dotted_after(tokens, i + 1))):
                # `import triton` or `from triton...`; not `from nanochat.flash_attention import flash_attn`,
                # a name of the project's own module
                sites.append(Site(line, f"import {after.string}"))
            elif name == "tf32" and after is not None and after.string == "=" and calls and calls[-1] \
                    and i + 2 < len(tokens) and tokens[i + 2].string == "True":
                sites.append(Site(line, "tf32=True"))
            elif name == "cuda" and after is not None and after.string in ("(", ".") and (dotted or after.string == "."):
                sites.append(Site(line, "cuda" + after.string))
            elif name == "cudnn" and opening in ("import", "from"):
                pass  # importing torch.backends.cudnn is harmless on NPU; its flags are sites where set
            elif name == "is_cuda" and dotted:
                sites.append(Site(line, ".is_cuda"))
            elif (_CUDA_WORD.search(name) and (dotted or (after is not None and after.string in ("(", ".")))) or _CUDA_CLASS.fullmatch(name):
                sites.append(Site(line, name))
            elif name in ("gpus", "no_cuda") and after is not None and after.string == "=" and calls and calls[-1]:
                sites.append(Site(line, f"{name}="))
            continue
        if tok.type != tokenize.STRING:
            continue
        statement_start = before is None or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if statement_start and (after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
            continue  # a string statement: a docstring
        if any(c in _TEXT_CALLS for c in calls):
            continue
        keyword = tokens[i - 2].string if i >= 2 and before is not None and before.string == "=" else None
        if keyword in _TEXT_KEYWORDS:
            continue
        value = _string_value(tok.string)
        if value is None:
            continue
        if _DEVICE.fullmatch(value) or value == "cuda:" or value.lower() == "nccl" or _ENV.fullmatch(value) \
                or value in ("CUDAExecutionProvider", "TensorrtExecutionProvider") or value.startswith("torch.cuda.") \
                or _OPTION_VALUES.fullmatch(value):
            sites.append(Site(line, repr(value)))
        elif keyword == "accelerator" and value in ("gpu", "cuda"):
            sites.append(Site(line, f"accelerator={value!r}"))
    return sites


def _dotted_after(tokens: list[tokenize.TokenInfo], start: int) -> str:
    """`cuda.bindings.driver` from the tokens at `start` (names joined by dots)."""
    parts, i = [], start
    while i < len(tokens) and tokens[i].type == tokenize.NAME:
        parts.append(tokens[i].string)
        if i + 1 < len(tokens) and tokens[i + 1].string == ".":
            i += 2
        else:
            break
    return ".".join(parts)


# -- launch scripts, YAML configs and requirements: CUDA lines, by patterns of this script's own --
_SHELL_SITES = [
    # the variables NVIDIA's and PyTorch's CUDA stacks read (a script's own `CUDA_FLAG` is none of them)
    ("CUDA environment variable", re.compile(
        r"\b(?:CUDA_(?:VISIBLE_DEVICES|LAUNCH_BLOCKING|HOME|PATH|ROOT|DEVICE_ORDER|MODULE_LOADING"
        r"|DEVICE_MAX_CONNECTIONS|CACHE_\w+|MPS_\w+|AUTO_BOOST)|(?:TORCH_)?NCCL_\w+|(?:TORCH_)?CUDNN_\w+|CUBLAS\w*"
        r"|NVIDIA_\w+|PYTORCH_CUDA_ALLOC_CONF|PYTORCH_NO_CUDA_MEMORY_CACHING|RWKV_CUDA_ON)\b")),
    ("nvidia-smi", re.compile(r"\bnvidia-smi\b")),
    ("CUDA toolkit", re.compile(r"\bmodule\s+(?:load|add)\s+cuda|\bnvcc\b")),
    ("NCCL backend", re.compile(r"--(?:dist[-_]|ddp[-_]|distributed[-_])?backend[= ]+['\"]?nccl\b")),
    ("tf32 flag", re.compile(r"--tf32(?:[= ]+['\"]?(?:True|true|1)\b|\s*(?:\\?$|\s--))")),
    ("CUDA-only option", re.compile(r"--(?:optim|attn_implementation|quantize|half_precision_backend)[= ]+['\"]?"
                                    r"(?:paged_\w+|\w*bnb\w*|\w*_8bit|lion_32bit|adamw_apex_fused|flash_attention_[23]"
                                    r"|bnb\.\w+|apex)\b")),
    ("CUDA device", re.compile(r"--device[= ]+['\"]?cuda\b")),
]
_CONFIG_SITES = [
    ("tf32", re.compile(r"^\s*tf32\s*:\s*(?:true|True|yes)\b")),
    ("CUDA-only option", re.compile(r"^\s*(?:optim|attn_implementation|quantize|half_precision_backend)\s*:\s*['\"]?"
                                    r"(?:paged_\w+|\w*bnb\w*|\w*_8bit|lion_32bit|adamw_apex_fused|flash_attention_[23]"
                                    r"|bnb\.\w+|apex)\b")),
    ("CUDA accelerator", re.compile(r"^\s*accelerator\s*:\s*['\"]?(?:gpu|cuda)\b")),
    ("CUDA device", re.compile(r"^\s*(?:device|device_type)\s*:\s*['\"]?cuda\b")),
    ("NCCL backend", re.compile(r"^\s*\w*backend\s*:\s*['\"]?nccl\b")),
]
_MANIFEST_SITES = [
    ("CUDA package", re.compile(r"^\s*(?:-\s*)?(?:\w+::)?(?:cudatoolkit|pytorch-cuda|cuda-\w+|cudnn|nccl|nvidia-[\w-]+|"
                                r"cupy[\w-]*|xformers|triton|flash[-_]attn|bitsandbytes|apex|tensorrt|onnxruntime-gpu|pynvml"
                                r"|nvidia-ml-py3?|gputil|gpustat|transformer[-_]engine)\b", re.IGNORECASE)),
    ("CUDA build", re.compile(r"\+cu\d+|download\.pytorch\.org/whl/(?:nightly/)?cu\d+|pypi\.nvidia\.com")),
]
_MANIFEST_NAME = re.compile(r"(?:.*requirements.*\.txt|environment.*\.ya?ml|conda.*\.ya?ml)$", re.IGNORECASE)


def _code_part(line: str) -> str:
    """A shell/YAML/requirements line without its comment (a `#` that starts a word)."""
    return re.split(r"(?:^|\s)#", line, maxsplit=1)[0]


def scan_lines(text: str, kind: str) -> list[Site]:
    """CUDA sites of a launch script (`shell`), a YAML config (`config`) or a manifest, one per
    line and pattern; never comments, `echo`/`printf` text or quoted help."""
    patterns = {"shell": _SHELL_SITES, "config": _CONFIG_SITES, "manifest": _MANIFEST_SITES}[kind]
    sites = []
    for number, line in enumerate(text.splitlines(), 1):
        code = _code_part(line)
        if kind == "shell" and re.match(r"\s*(?:echo|printf)\b", code):
            continue
        for what, pattern in patterns:
            if pattern.search(code):
                sites.append(Site(number, what))
    return sites


def text_kind(path: Path) -> str | None:
    """How the wide scan reads a non-Python file, or None (not read)."""
    if path.suffix in (".sh", ".bash"):
        return "shell"
    if _MANIFEST_NAME.match(path.name):
        return "manifest"
    if path.suffix in (".yml", ".yaml"):
        return "config"
    return None


def notebook_shell(text: str) -> list[tuple[int, str]]:
    """(cell index, the cell with only its `!command` lines, `!` removed) of each code cell."""
    found = []
    for index, code in notebook_cells(text):
        lines = [line.lstrip()[1:] if line.lstrip().startswith("!") else "" for line in code.split("\n")]
        if any(lines):
            found.append((index, "\n".join(lines) + "\n"))
    return found


# -- notebooks: code cells as one text, magics blanked, for the scanner ----------------------------
def notebook_cells(text: str) -> list[tuple[int, str]]:
    """(cell index, source) of each code cell."""
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return []
    found = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        found.append((index, "".join(source) if isinstance(source, list) else source))
    return found


def notebook_code(text: str) -> list[tuple[int, str]]:
    """(cell index, code) of each code cell; `%`/`!` lines are left out (not Python)."""
    found = []
    for index, source in notebook_cells(text):
        lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")]
        found.append((index, "\n".join(lines) + "\n"))
    return found


# -- statements and line maps --------------------------------------------------------------------
def statement_of(text: str) -> dict[int, tuple[int, int]]:
    """line -> (first, last) line of the innermost simple statement or compound header on it."""
    spans: dict[int, tuple[int, int]] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return spans
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        last = (body[0].lineno - 1) if isinstance(body, list) and body and isinstance(body[0], ast.stmt) \
            else (node.end_lineno or node.lineno)
        last = max(last, node.lineno)
        for line in range(node.lineno, last + 1):
            current = spans.get(line)
            if current is None or (last - node.lineno) < (current[1] - current[0]):
                spans[line] = (node.lineno, last)
    return spans


def line_map(old: str, new: str) -> dict[int, int]:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    mapping = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        for k, j in enumerate(range(j1, j2)):
            mapping[j + 1] = (i1 + k + 1) if tag == "equal" else min(i1 + k, max(i1, i2 - 1)) + 1
    return mapping


# -- one project ---------------------------------------------------------------------------------
@dataclass
class Tally:
    sites: int = 0
    rewritten: int = 0
    reported: int = 0
    silent: int = 0
    files: int = 0
    changed: int = 0
    guards: int = 0  # tests that decide whether CUDA-only code runs
    sent: int = 0  # of those, tests the migration turned to the NPU
    silent_sites: list[str] = field(default_factory=list)
    sent_sites: list[str] = field(default_factory=list)


def _units(path: Path, text: str) -> list[tuple[str, str]]:
    """(label prefix, Python text) of a file: the file itself, or a notebook's code cells."""
    if path.suffix == ".ipynb":
        return [(f"cell {index}", code) for index, code in notebook_code(text)]
    return [("", text)]


def _pairs(old: str, new: str, kind: str) -> list[tuple[str, str, str, int | None, str]]:
    """(label, old text, new text, cell, how to scan it) of a file's units."""
    if kind != "notebook":
        return [("", old, new, None, kind)]
    pairs = []
    for extract, how in ((notebook_code, "python"), (notebook_shell, "shell")):
        old_cells, new_cells = dict(extract(old)), dict(extract(new))
        pairs += [(f"cell {i}", code, new_cells.get(i, code), i, how) for i, code in old_cells.items()]
    return pairs


def tally_file(relative: str, old: str, new: str, diagnostics: list[dict], tally: Tally, kind: str) -> None:
    """Count a file's sites: `kind` is python, notebook, shell, config or manifest."""
    for label, before, after, cell, how in _pairs(old, new, kind):
        scanner = scan if how == "python" else (lambda text, how=how: scan_lines(text, how))
        sites = scanner(before)
        tally.sites += len(sites)
        if how == "python":
            guards = cuda_only_guards(before)
            tally.guards += len(guards)
            for line, test in sent_to_npu(guards, before, after):
                tally.sent += 1
                tally.sent_sites.append(f"{relative}:{label + ':' if label else ''}{line}: {test}")
        left = scanner(after)
        tally.rewritten += max(0, len(sites) - len(left))
        if not left:
            continue
        mapping = line_map(before, after)
        spans = statement_of(before) if how == "python" else {}
        named = {d["line"] for d in diagnostics if cell is None or d.get("cell") == cell}
        for site in left:
            line = mapping.get(site.line, site.line)
            first, last = spans.get(line, (line, line))
            if any(first <= n <= last for n in named):
                tally.reported += 1
            else:
                tally.silent += 1
                where = f"{relative}:{label + ':' if label else ''}{line}"
                tally.silent_sites.append(f"{where}: {site.what}")


# -- guards into CUDA-only code (independent of the tool's NPU511) -----------------------------------
_CUDA_TEST = re.compile(r"""['"]cuda['"]|\.is_cuda\b|cuda\.is_available\(\)""")


# identifiers the project itself defines anywhere (functions, classes, parameters, assigned names
# and attributes, module files) that merely contain a CUDA word (`scale_blocked_for_cublas`,
# `cudnn_benchmark`, `sfa_nccl`, `cublaslt_quant_out`): the project's names, not CUDA APIs; the
# bare API words themselves (`cuda`, `cudnn`, `nccl`, ...) never count as the project's
PROJECT_NAMES: set[str] = set()
_API_WORDS = re.compile(r"(?i)cuda|cudnn|nccl|cublas|cublaslt|cufft|nvtx")


def project_names(folder: Path) -> set[str]:
    defined: set[str] = set()  # defs, classes, module files: any CUDA-looking name of the project
    bound: set[str] = set()  # parameters and assignment targets: only snake-case names with a CUDA word
    for path in folder.rglob("*.py"):
        defined.add(path.stem)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                bound.add(node.attr)
    # a re-export such as mmcv's `CUDA_HOME = ...` or `CUDAExtension = ...` is still the API
    found = {n for n in defined if _CUDA_WORD.search(n) or _CUDA_CLASS.fullmatch(n)}
    found |= {n for n in bound if _CUDA_WORD.search(n) and n.islower()}
    return {name for name in found if not _API_WORDS.fullmatch(name)}


# the project's own modules that import a CUDA-only library at their top level (whisper's
# `triton_ops.py`), by file stem: set per project by `run_project`
PROJECT_CUDA_MODULES: set[str] = set()


def project_cuda_modules(folder: Path) -> set[str]:
    """Stems of the project's Python files with a top-level CUDA-only import."""
    found = set()
    for path in folder.rglob("*.py"):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
            continue
        if any(_lib_import(node) for node in _module_level(tree.body)):
            found.add(path.stem)
    return found


def _module_level(statements: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run when a module is imported (inside `try`/`if` blocks too, not in functions)."""
    found = []
    for statement in statements:
        found.append(statement)
        if isinstance(statement, (ast.Try, ast.If, ast.With)):
            for name in ("body", "orelse", "finalbody"):
                found += _module_level(getattr(statement, name, []))
            for handler in getattr(statement, "handlers", []):
                found += _module_level(handler.body)
    return found


def _lib_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom) and node.level:
        parts = {*(node.module or "").split("."), *(a.name for a in node.names)}
        return bool(parts & PROJECT_CUDA_MODULES)
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] in _LIBRARIES or _KERNEL_MODULES.match(a.name) for a in node.names)
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return node.module.split(".")[0] in _LIBRARIES or bool(_KERNEL_MODULES.match(node.module)) or any(
            _KERNEL_MODULES.match(f"{node.module}.{a.name}") for a in node.names)
    return False


def _cuda_only_names(tree: ast.Module) -> set[str]:
    """Names that lead to CUDA-only code in a file: bound by a CUDA-only import at module level,
    module-level functions that import one, name `.cu` sources or use such a name (followed until
    nothing new), and the globals a `.cu`-building function sets."""
    names: set[str] = set()
    for node in tree.body:
        if _lib_import(node):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)  # type: ignore[attr-defined]
    for node in _module_level(tree.body):
        # a module-level JIT build from CUDA sources (`ext = load(..., sources=['k.cu'])`, also under
        # an `if`), and torch's CUDA extension class imported by name (a setup.py's `CUDAExtension`)
        if isinstance(node, ast.Assign) and _reaches(list(ast.walk(node.value)), set()):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            names.update(a.asname or a.name for a in node.names if a.name in ("CUDAExtension", "CUDA_HOME"))
    functions = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    changed = True
    while changed:
        changed = False
        for name, function in functions.items():
            if name not in names and _reaches(list(ast.walk(function)), names):
                names.add(name)
                names.update(g for n in ast.walk(function) if isinstance(n, ast.Global) for g in n.names)
                changed = True
    return names


def _reaches(nodes: list[ast.AST], names: set[str]) -> bool:
    for node in nodes:
        if _lib_import(node):
            return True
        if isinstance(node, ast.Name) and node.id in names:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith((".cu", ".cuh")):
            return True
    return False


def _walked(nodes: list[ast.AST]) -> list[ast.AST]:
    return [n for node in nodes for n in ast.walk(node)]


def cuda_only_guards(text: str) -> list[tuple[int, str]]:
    """(line, test) of the tests that decide whether CUDA-only code runs: an `if` on CUDA whose
    body reaches it (or, for an early-return gate `if not <on CUDA>: return`, the statements after
    it), and a conjunction with a CUDA test and an operand that reaches it."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names = _cuda_only_names(tree)
    found = []
    for block in ast.walk(tree):
        for field_name in ("body", "orelse"):
            statements = getattr(block, field_name, None)
            if not isinstance(statements, list):
                continue
            for index, statement in enumerate(statements):
                if not isinstance(statement, ast.If):
                    continue
                test = ast.get_source_segment(text, statement.test) or ""
                if not _CUDA_TEST.search(test):
                    continue
                guarded: list[ast.AST] = list(statement.body)
                gate = statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise))
                if gate and re.search(r"!=|\bnot\b", test):
                    guarded = list(statement.orelse) + statements[index + 1:]  # `else:` or after the gate
                if _reaches(_walked(guarded), names):
                    found.append((statement.lineno, test))
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            parts = [(v, ast.get_source_segment(text, v) or "") for v in node.values]
            if any(_CUDA_TEST.search(p) for _, p in parts) and _reaches(
                    _walked([v for v, p in parts if not _CUDA_TEST.search(p)]), names):
                found.append((node.lineno, ast.get_source_segment(text, node) or ""))
    return sorted(set(found))


def sent_to_npu(guards: list[tuple[int, str]], old: str, new: str) -> list[tuple[int, str]]:
    """The guards whose CUDA test the migration turned into an NPU test."""
    if not guards or old == new:
        return []
    mapping = {original: migrated for migrated, original in line_map(old, new).items()}
    lines = new.splitlines()
    sent = []
    for line, test in guards:
        migrated = mapping.get(line)
        text = lines[migrated - 1] if migrated and migrated <= len(lines) else ""
        if "npu" in text and not _CUDA_TEST.search(text):
            sent.append((line, test.splitlines()[0]))
    return sent


def _diagnostic_lines(entry: dict) -> list[dict]:
    found = []
    for d in entry.get("diagnostics", []):
        item = {"line": d["line"]}
        match = re.match(r"cell (\d+)", d.get("message", ""))
        if match:
            item["cell"] = int(match.group(1)) - 1  # messages count cells from 1
        if "cell" in d:
            item["cell"] = d["cell"]
        found.append(item)
    return found


def _apply(source: Path, folder: Path, copy: Path) -> tuple[float, dict]:
    """One `apply` process of the checkout at `source` over `folder`: (seconds, JSON output)."""
    shutil.rmtree(copy, ignore_errors=True)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "--isolated",
                             "--format", "json", "--output-dir", str(copy), str(folder)],
                            capture_output=True, text=True, cwd=folder.parent,
                            env={**os.environ, "PYTHONPATH": str(source)}, check=False)
    seconds = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"{folder.name}: apply ({source}) failed ({result.returncode}): {result.stderr[-2000:]}")
    return seconds, json.loads(result.stdout)


def run_project(folder: Path, repeat: int, hunks: list[tuple[str, str]] | None,
                baseline: Path | None = None, imports: dict | None = None
                ) -> tuple[Tally, float, float | None, ImportTally | None]:
    """`imports`: options of the emulation import check ({"timeout": s, "jobs": n}), or None."""
    times, base_times = [], []
    changed_python: list[str] = []
    payload: dict = {}
    with tempfile.TemporaryDirectory(prefix="nsm-") as scratch:
        copy = Path(scratch) / "out"
        for _ in range(repeat):  # interleaved, so both see the same machine load
            if baseline is not None:
                base_times.append(_apply(baseline, folder, copy)[0])
            seconds, payload = _apply(REPO, folder, copy)
            times.append(seconds)
        by_path = {os.path.relpath(os.path.join(folder.parent, e["path"]), folder): e for e in payload["files"]}
        PROJECT_CUDA_MODULES.clear()
        PROJECT_CUDA_MODULES.update(project_cuda_modules(folder))
        PROJECT_NAMES.clear()
        PROJECT_NAMES.update(project_names(folder))
        tally = Tally()
        for path in sorted(folder.rglob("*")):
            kind = {".py": "python", ".ipynb": "notebook"}.get(path.suffix) or text_kind(path)
            if kind is None or any(p.startswith(".") for p in path.relative_to(folder).parts) or not path.is_file():
                continue
            relative = str(path.relative_to(folder))
            try:
                old = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            migrated = copy / relative
            new = migrated.read_text(encoding="utf-8") if migrated.exists() else old
            entry = by_path.get(relative, {})
            tally.files += 1
            tally.changed += old != new
            if old != new and path.suffix == ".py":
                changed_python.append(relative)
            tally_file(relative, old, new, _diagnostic_lines(entry), tally, kind)
            if hunks is not None and old != new and path.suffix == ".py":
                for hunk in _hunks(old, new, f"{folder.name}/{relative}"):
                    hunks.append((folder.name, hunk))
        checked = None
        if imports is not None:
            _complete_copy(folder, copy)
            checked = check_imports(folder, copy, entry_points(copy, changed_python), imports["timeout"],
                                    imports["jobs"])
    return tally, statistics.median(times), statistics.median(base_times) if base_times else None, checked


def _complete_copy(folder: Path, copy: Path) -> None:
    """`--output-dir` holds the migrated files; the import check needs the rest of the project too
    (unchanged modules, data files next to the code)."""
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(p.startswith(".") for p in relative.parts) or not path.is_file():
            continue
        target = copy / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def _hunks(old: str, new: str, name: str) -> list[str]:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), name, name, n=1, lineterm=""))
    hunks, current = [], []
    for line in diff[2:]:
        if line.startswith("@@") and current:
            hunks.append("\n".join(current))
            current = []
        current.append(line if not line.startswith("@@") else f"{line} {name}")
    if current:
        hunks.append("\n".join(current))
    return hunks


# -- the emulation import check of migrated entry points -------------------------------------------
_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]", re.MULTILINE)
_ENTRY_NAME = re.compile(r"(train|main|run|pretrain|finetune|fine_tune|sample|inference|infer|eval|evaluate|"
                         r"predict|detect|val|demo|benchmark)\w*\.py")
_NOT_ENTRIES = {"setup.py", "conftest.py", "__init__.py", "__main__.py"}
DRIVER = Path(__file__).resolve().parent / "emulated_import.py"


@dataclass
class ImportTally:
    entries: int = 0
    ok: int = 0
    stubbed: int = 0  # imported, with stubs standing for third-party packages not installed here
    packages: set[str] = field(default_factory=set)  # those packages
    before: int = 0  # the original entry fails the same way without the migration
    ours: int = 0  # only the migrated entry fails: our fault
    details: list[str] = field(default_factory=list)


def entry_points(folder: Path, changed: list[str]) -> list[str]:
    """Migrated (changed) scripts that are entry points: an `if __name__ == "__main__":` block, or a
    train/main-like name; not tests, not packaging."""
    found = []
    for relative in changed:
        parts = Path(relative).parts
        name = parts[-1]
        if name in _NOT_ENTRIES or name.startswith("test_") or any(p in ("tests", "test", "docs") for p in parts):
            continue
        text = (folder / relative).read_text(encoding="utf-8", errors="replace")
        if _GUARD.search(text) or _ENTRY_NAME.fullmatch(name):
            found.append(relative)
    return found


def _import_once(project: Path, entry: Path, emulated: bool, timeout: float) -> dict:
    command = [sys.executable] + (["-m", "npu_migrate.emulation"] if emulated else []) + [str(DRIVER), str(project), str(entry)]
    # belt and braces with the driver's own blocking: pip refuses to install outside a venv
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "PIP_REQUIRE_VIRTUALENV": "1", "PIP_NO_INDEX": "1", "HF_HUB_OFFLINE": "1", "YOLO_OFFLINE": "1"}
    try:
        result = subprocess.run(command, capture_output=True, text=True, cwd=project, env=env, timeout=timeout,
                                check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "type": "Timeout", "message": f"still importing after {timeout:.0f} s"}
    for line in reversed(result.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {"status": "failed", "type": f"exit {result.returncode}", "message": result.stderr.strip()[-300:]}


def check_imports(original: Path, migrated: Path, entries: list[str], timeout: float, jobs: int) -> ImportTally:
    """Import each migrated entry point under `python -m npu_migrate.emulation` (module body, not
    `__main__`; stubs for third-party packages not installed here); a failure is classified: the
    same failure in the original entry without the migration (plain python, same stubs), or ours."""
    from concurrent.futures import ThreadPoolExecutor

    tally = ImportTally(entries=len(entries))

    def one(relative: str) -> tuple[str, str, str, list[str]]:
        result = _import_once(migrated, migrated / relative, True, timeout)
        stubs = result.get("stubbed") or []
        if result["status"] == "ok":
            return relative, "stubbed" if stubs else "ok", result.get("mode", ""), stubs
        before = _import_once(original, original / relative, False, timeout)
        what = f"{result.get('type')}: {result.get('message', '')[:160]} ({result.get('where')})"
        if before["status"] != "ok" and before.get("type") == result.get("type") \
                and before.get("missing") == result.get("missing"):
            return relative, "before", what, stubs
        return relative, "ours", what, stubs

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for relative, verdict, why, stubs in pool.map(one, entries):
            setattr(tally, verdict, getattr(tally, verdict) + 1)
            tally.packages.update(stubs)
            tally.details.append(f"{verdict}: {relative}: {why}" + (f" [stubs: {', '.join(stubs)}]" if stubs else ""))
    return tally


def _commit(folder: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def pinned_projects(corpus: Path, only: list[str] | None) -> Iterator[tuple[Path, str, str]]:
    """(clone folder, owner/name, commit) of each project to run: those named by `only` (all when
    empty), cloned under `corpus` at the pinned commit; the others get a line saying why not."""
    for folder_name, repo, commit, _why in PROJECTS:
        if only and not any(o in folder_name for o in only):
            continue
        folder = corpus / folder_name
        if not folder.is_dir():
            print(f"skipped {repo}: no clone at {folder} (git clone it at {commit})")
            continue
        head = _commit(folder)
        if head != commit:
            print(f"skipped {repo}: {folder} is at {head}, not the pinned {commit}")
            continue
        yield folder, repo, commit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="/work/corpus", help="folder holding the clones (OWNER+NAME)")
    parser.add_argument("--repeat", type=int, default=1, help="apply runs per project; the time is their median")
    parser.add_argument("--list-silent", action="store_true", help="print every silent site")
    parser.add_argument("--only", action="append", default=[], help="run only projects whose folder contains this")
    parser.add_argument("--hunks", type=int, default=0, help="write a seeded sample of N changed hunks")
    parser.add_argument("--hunks-out", default="bench/results/hunk_sample.md")
    parser.add_argument("--baseline", help="another checkout of npu-migrate (e.g. before issue 14) to time on "
                                           "the same projects, interleaved with ours")
    parser.add_argument("--no-imports", action="store_true",
                        help="skip the emulation import check of the migrated entry points")
    parser.add_argument("--import-timeout", type=float, default=90.0, help="seconds per entry point import")
    parser.add_argument("--import-jobs", type=int, default=2, help="entry points imported at once")
    parser.add_argument("--list-imports", action="store_true", help="print the verdict of every entry point")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    imports = None if args.no_imports else {"timeout": args.import_timeout, "jobs": args.import_jobs}
    checks: list[tuple[str, ImportTally]] = []
    rows, all_hunks = [], ([] if args.hunks else None)
    baseline = Path(args.baseline).resolve() if args.baseline else None
    extra = " baseline time | ratio |" if baseline else ""
    print("| project | commit | files | changed | CUDA sites | rewritten | reported | silent | CUDA-only guards "
          "| sent to NPU | time |" + extra)
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if baseline else ""))
    total = Tally()
    for folder, repo, commit in pinned_projects(corpus, args.only):
        tally, seconds, base, checked = run_project(folder, args.repeat, all_hunks, baseline, imports)
        rows.append((repo, tally))
        if checked is not None:
            checks.append((repo, checked))
        for name in ("sites", "rewritten", "reported", "silent", "files", "changed", "guards", "sent"):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
        print(f"| {repo} | {commit[:7]} | {tally.files} | {tally.changed} | {tally.sites} | {tally.rewritten} | "
              f"{tally.reported} | **{tally.silent}** | {tally.guards} | **{tally.sent}** | {seconds:.2f} s |"
              + (f" {base:.2f} s | {seconds / base:.2f} |" if base else ""), flush=True)
    print(f"| **total** | | {total.files} | {total.changed} | {total.sites} | {total.rewritten} | "
          f"{total.reported} | **{total.silent}** | {total.guards} | **{total.sent}** | |")
    if checks:
        print("\n| project | migrated entry points | import ok | ok with stubs | fails before migration too | ours "
              "| stubbed packages |")
        print("|---|---|---|---|---|---|---|")
        for repo, checked in checks:
            print(f"| {repo} | {checked.entries} | {checked.ok} | {checked.stubbed} | {checked.before} | "
                  f"**{checked.ours}** | {', '.join(sorted(checked.packages)) or '-'} |")
        for repo, checked in checks:
            for line in checked.details:
                if args.list_imports or line.startswith("ours"):
                    print(f"import: {repo}: {line}")
    if args.list_silent:
        for repo, tally in rows:
            for site in tally.silent_sites:
                print(f"silent: {repo}: {site}")
    for repo, tally in rows:
        for site in tally.sent_sites:
            print(f"sent to the NPU: {repo}: {site}")
    if all_hunks is not None:
        sample = random.Random(14).sample(all_hunks, min(args.hunks, len(all_hunks)))
        out = Path(args.hunks_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n\n".join(f"### {i + 1}. {project}\n```diff\n{hunk}\n```" for i, (project, hunk)
                                   in enumerate(sample)) + "\n", encoding="utf-8")
        print(f"{len(sample)} of {len(all_hunks)} changed hunks written to {out}")
    return 1 if total.silent or total.sent or any(c.ours for _, c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())

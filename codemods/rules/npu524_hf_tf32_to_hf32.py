"""NPU524: the hf-tf32-to-hf32 rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.data import catalogue
from npu_migrate.core.diagnostics import Severity

# the statement that gives the NPU what `tf32=True` gave a CUDA GPU (NPU160's counterpart of
# `torch.backends.cuda.matmul.allow_tf32 = True`; convolutions allow HF32 by default)
HF32 = cst.parse_statement("torch.npu.matmul.allow_hf32 = True\n")


def _entry() -> dict[str, Any]:
    return next(e for e in catalogue.option_entries() if e.get("code") == "NPU524")


def _without(args: list[cst.Arg], index: int) -> list[cst.Arg]:
    """`args` without the one at `index`; the new last argument keeps no trailing comma unless the
    removed one had one (a call laid out one argument per line keeps its layout)."""
    kept = args[:index] + args[index + 1:]
    if index == len(args) - 1 and kept:
        kept[-1] = kept[-1].with_changes(comma=args[index].comma)
    return kept


class HuggingFaceTf32(Rule):
    """## What it does

    `TrainingArguments(tf32=True)` (and the TRL configs built on it) loses `tf32=True` and the statement gets `torch.npu.matmul.allow_hf32 = True` in front of it; a computed `tf32=` is reported

    ## Why

    transformers raises `ValueError("--tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7")` from `TrainingArguments.__post_init__` wherever `is_torch_tf32_available()` is False, which it is on every Ascend machine (it asks for a CUDA GPU of compute capability 8 or more; no release of transformers has an NPU branch there), so every training entry point stops at start-up. `tf32=True` asks for reduced-precision float32 matmuls; the NPU's counterpart is HF32, `torch.npu.matmul.allow_hf32 = True` (off by default; `torch.npu.conv.allow_hf32` is on by default), the same route NPU160 takes for `torch.backends.cuda.matmul.allow_tf32`. `tf32=False` and `tf32=None` run everywhere and stay. A value the code computes (`tf32=args.tf32`) is reported: when it is True the program stops. Launch scripts (`--tf32 True`) are NPU258, YAML configs (`tf32: true`) NPU541.

    ## Example

    ```python
    # before
    import transformers
    args = transformers.TrainingArguments(output_dir="o", bf16=True, tf32=True)
    # after
    import transformers
    torch.npu.matmul.allow_hf32 = True
    args = transformers.TrainingArguments(output_dir="o", bf16=True)
    ```

    ## Fix safety

    Safe: the program no longer stops, and its float32 matmuls take the NPU's reduced-precision path, as they took CUDA's. Suppress with `# npu-migrate: ignore[NPU524]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet (the rewrite names torch_npu's values; under `--target portable` it is reported instead)
    """

    code = "NPU524"
    name = "hf-tf32-to-hf32"
    summary = "`TrainingArguments(tf32=True)` (which raises on Ascend) becomes `torch.npu.matmul.allow_hf32 = True`"
    fix = Fix.SAFE
    severity = Severity.WARNING
    needs_torch_npu = True
    prefilter = r"\btf32\s*="

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._statements: list[bool] = []  # per enclosing simple statement: whether HF32 goes before it

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statements.append(False)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        if not self._statements.pop():
            return updated_node
        return cst.FlattenSentinel([HF32, updated_node])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        qualified = self.resolve(original_node.func) or ""
        last = qualified.rsplit(".", 1)[-1]
        if not (qualified.startswith(("transformers.", "trl.")) and last.endswith(("Arguments", "Config"))):
            return updated_node
        for index, arg in enumerate(original_node.args):
            if not (arg.keyword and arg.keyword.value == "tf32"):
                continue
            value = arg.value
            if isinstance(value, cst.Name) and value.value in ("False", "None"):
                return updated_node
            entry = _entry()
            if isinstance(value, cst.Name) and value.value == "True" and self._statements \
                    and len(updated_node.args) == len(original_node.args):
                self._statements[-1] = True
                self.context.require_import("torch")
                self.fixed(arg, "`tf32=True` → `torch.npu.matmul.allow_hf32 = True` before the statement: " + entry["message"])
                return updated_node.with_changes(args=_without(list(updated_node.args), index))
            self.report(arg, "`tf32=` (when it is True): " + entry["message"] + "; pass `tf32=False` (or leave it out) "
                             "and set `torch.npu.matmul.allow_hf32 = True` for the same effect")
        return updated_node


CASES = [
    Invalid(  # stanford_alpaca's train.py gets `--tf32 True` from its README's command line
        """\
    import torch
    import transformers
    args = transformers.TrainingArguments(output_dir="o", bf16=True, tf32=True)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    import transformers
    torch.npu.matmul.allow_hf32 = True
    args = transformers.TrainingArguments(output_dir="o", bf16=True)
    """,
        codes=("NPU100", "NPU524"),
        with_rules=("NPU100",),
    ),
    Invalid(
        """\
    from trl import SFTConfig


    def config(args):
        return SFTConfig(
            output_dir="o",
            tf32=True,
        )
    """,
        codes=("NPU100", "NPU524"),
        after="""\
    import torch
    from trl import SFTConfig


    def config(args):
        torch.npu.matmul.allow_hf32 = True
        return SFTConfig(
            output_dir="o",
        )
    """,
    ),
    Invalid(  # a computed value is reported
        """\
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", tf32=cli.tf32)
    """,
    ),
    Valid(
        """\
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", tf32=False)
    tf32 = True
    settings(tf32=True)
    """,
    ),
]

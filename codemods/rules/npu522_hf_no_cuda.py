"""NPU522: the hf-no-cuda rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from npu_migrate.core.diagnostics import Severity


class HuggingFaceNoCuda(Rule):
    """## What it does

    Hugging Face `TrainingArguments(no_cuda=...)` becomes `use_cpu=...`; `TrainingArguments(tf32=True)` is reported.

    ## Why

    `no_cuda` is deprecated in transformers >= 4.34 for the device-neutral `use_cpu`. `device_map="cuda"` is a device position of NPU103 (`codemods/data/device_positions_frameworks.json`).

    `tf32=True` makes `TrainingArguments` raise `ValueError("--tf32 requires Ampere or a newer GPU arch, ...")` wherever `transformers.utils.is_torch_tf32_available()` is False, which it is on an Ascend machine (it asks for a CUDA GPU of compute capability 8 or more). So it is reported, as a warning where the value is `True` and where it is not a literal; `tf32=False` and `tf32=None` run everywhere. The NPU's counterpart is HF32: drop the argument and set `torch.npu.matmul.allow_hf32 = True` (and `torch.npu.conv.allow_hf32`, on by default) before training.

    ## Example

    ```python
    # before
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", no_cuda=True)
    # after
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", use_cpu=True)
    ```

    ## Fix safety

    Safe: the same switch under its current name.
    Suppress with `# npu-migrate: ignore[NPU522]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the same rewrite (`use_cpu=` is device-generic)
    """

    code = "NPU522"
    supported_targets = frozenset({"npu", "portable"})
    name = "hf-no-cuda"
    summary = "Hugging Face `TrainingArguments(no_cuda=...)` becomes `use_cpu=...`; `tf32=True` is reported"
    fix = Fix.SAFE
    prefilter = r"no_cuda\s*=|\btf32\s*="

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        qualified = self.resolve(original_node.func) or ""
        if not (qualified.startswith("transformers.") and qualified.endswith("TrainingArguments")):
            return updated_node
        self._report_tf32(original_node)
        if any(a.keyword and a.keyword.value == "use_cpu" for a in updated_node.args):
            return updated_node
        args, changed = list(updated_node.args), False
        for i, arg in enumerate(updated_node.args):
            if arg.keyword and arg.keyword.value == "no_cuda":
                args[i] = arg.with_changes(keyword=arg.keyword.with_changes(value="use_cpu"))
                self.fixed(original_node.args[i], "`no_cuda=` → `use_cpu=` (device-neutral, transformers >= 4.34)")
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node


    def _report_tf32(self, node: cst.Call) -> None:
        """`tf32=True` (or a value that may be True): transformers raises on a machine without an
        Ampere CUDA GPU, which an Ascend machine is."""
        for arg in node.args:
            if arg.keyword and arg.keyword.value == "tf32":
                value = arg.value
                if isinstance(value, cst.Name) and value.value in ("False", "None"):
                    return
                maybe = "" if isinstance(value, cst.Name) and value.value == "True" else " (when it is True)"
                self.report(arg, f"`tf32=`{maybe} makes TrainingArguments raise ValueError on an Ascend machine "
                                 "(transformers' `is_torch_tf32_available()` asks for an Ampere CUDA GPU): drop it and "
                                 "set `torch.npu.matmul.allow_hf32 = True` for the NPU's reduced-precision matmuls",
                            severity=Severity.WARNING)


CASES = [
    Invalid(
        """\
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", no_cuda=True)
""",
        after="""\
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", use_cpu=True)
""",
    ),
    # stanford_alpaca's README passes `--tf32 True`: a literal `tf32=True` (or a variable) is reported
    Invalid(
        """\
import transformers
args = transformers.TrainingArguments(output_dir="o", bf16=True, tf32=True)
""",
    ),
    Valid(
        """\
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", tf32=False)
tf32 = True
""",
    ),
    Valid(
        """\
def no_cuda(no_cuda=True):
    return no_cuda
""",
    ),
]

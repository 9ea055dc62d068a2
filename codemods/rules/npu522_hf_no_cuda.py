"""NPU522: the hf-no-cuda rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule


class HuggingFaceNoCuda(Rule):
    """## What it does

    Hugging Face `TrainingArguments(no_cuda=...)` becomes `use_cpu=...` (`tf32=True` is NPU524's).

    ## Why

    `no_cuda` is deprecated in transformers >= 4.34 for the device-neutral `use_cpu`. `device_map="cuda"` is a device position of NPU103 (`codemods/data/device_positions_frameworks.json`).

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
    summary = "Hugging Face `TrainingArguments(no_cuda=...)` becomes `use_cpu=...`"
    fix = Fix.SAFE
    prefilter = r"no_cuda\s*="

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        qualified = self.resolve(original_node.func) or ""
        if not (qualified.startswith("transformers.") and qualified.endswith("TrainingArguments")):
            return updated_node
        if any(a.keyword and a.keyword.value == "use_cpu" for a in updated_node.args):
            return updated_node
        args, changed = list(updated_node.args), False
        for i, arg in enumerate(updated_node.args):
            if arg.keyword and arg.keyword.value == "no_cuda":
                args[i] = arg.with_changes(keyword=arg.keyword.with_changes(value="use_cpu"))
                self.fixed(original_node.args[i], "`no_cuda=` → `use_cpu=` (device-neutral, transformers >= 4.34)")
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node


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
    Valid(
        """\
def no_cuda(no_cuda=True):
    return no_cuda
""",
    ),
    Invalid(
        """\
from transformers import TrainingArguments, AutoModel
a = TrainingArguments(output_dir='o', no_cuda=True)
""",
        after="""\
from transformers import TrainingArguments, AutoModel
a = TrainingArguments(output_dir='o', use_cpu=True)
""",
    ),
    Valid(
        """\
from transformers import TrainingArguments
a = TrainingArguments(output_dir='o', no_cuda=True, use_cpu=False)
""",
        with_rules=('NPU103', 'NPU120', 'NPU520', 'NPU521', 'NPU530'),
    ),
]

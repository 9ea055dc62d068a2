"""NPU121: the torch-cuda-no-counterpart rule."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.families.torch_cuda_api import cuda_names
from codemods.model.cstnodes import dotted_name
from npu_migrate.core.diagnostics import Severity

CUDA = "torch.cuda"


# `torch.cuda.X`, `cuda.X`, `from torch.cuda import`, `from torch import cuda[,)]`, `... cuda as`
PREFILTER = r"\bcuda\b(?:\.[A-Za-z_]|\s*[,)]|\s+(?:import|as)\b)|import[^\n]*\bcuda\b"


class TorchCudaNoCounterpart(Rule):
    """## What it does

    `torch.cuda` names with no NPU counterpart are reported with what to use instead

    ## Why

    Upstream `torch.cuda` names that `torch_npu.npu` does not provide keep their CUDA behaviour even
    under `transfer_to_npu`: on an NPU machine they raise or return nonsense. There is no rewrite to
    make; each use (`torch.cuda.get_arch_list()`, `from torch.cuda import temperature`) gets a
    warning with the replacement the fact sheet (§2.6) gives: `npu-smi` for temperature, power and
    clock, `torch.npu.mem_get_info()` for device memory, HF32 switches for TF32, `torch.npu.NPUPluggableAllocator`
    for `CUDAPluggableAllocator`, and so on. The list and the advice are the `flag` entries of
    `codemods/data/torch_cuda.json`.

    ## Example

    ```python
    archs = torch.cuda.get_arch_list()
    # NPU121 `torch.cuda.get_arch_list`: no NPU equivalent: there are no CUDA architectures on NPU;
    #        remove the check or test torch.npu.is_available()
    ```

    ## Fix safety

    Diagnostic only; nothing is changed. Suppress with `# npu-migrate: ignore[NPU121]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU121"
    prefilter_in_code = True
    supported_targets = frozenset({"npu", "portable"})
    name = "torch-cuda-no-counterpart"
    summary = "`torch.cuda` names with no NPU counterpart are reported with what to use instead"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = PREFILTER

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.flags = cuda_names().flags

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = node.attr.value
        if name in self.flags and self.resolve(node.value) == CUDA:
            self.report(node, f"`torch.cuda.{name}`: {self.flags[name]}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar) or dotted_name(node.module) != CUDA:
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name in self.flags:
                self.report(alias, f"`torch.cuda.{name}`: {self.flags[name]}")


CASES = [
    Invalid(
        """\
import os
import torch
archs = torch.cuda.get_arch_list()
# NPU121 `torch.cuda.get_arch_list`: no NPU equivalent: there are no CUDA architectures on NPU;
#        remove the check or test torch.npu.is_available()
""",
    ),
    Invalid(
        """\
from torch.cuda import synchronize, get_arch_list  # mixed
""",
        after="""\
from torch.cuda import get_arch_list; from torch.npu import synchronize  # mixed
""",
        codes=('NPU120', 'NPU121'),
        lines=(1,),
        with_rules=('NPU120',),
    ),
]

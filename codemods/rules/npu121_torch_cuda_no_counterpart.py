"""NPU121: the torch-cuda-no-counterpart rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.base import Fix, Rule, dotted_name
from codemods.framework.families.torch_cuda_api import cuda_names
from npu_migrate.core.diagnostics import Severity

CUDA = "torch.cuda"


# `torch.cuda.X`, `cuda.X`, `from torch.cuda import`, `from torch import cuda[,)]`, `... cuda as`
PREFILTER = r"\bcuda\b(?:\.[A-Za-z_]|\s*[,)]|\s+(?:import|as)\b)|import[^\n]*\bcuda\b"


class TorchCudaNoCounterpart(Rule):
    code = "NPU121"
    name = "torch-cuda-no-counterpart"
    summary = "`torch.cuda` names with no NPU counterpart are reported with what to use instead"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = PREFILTER

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
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


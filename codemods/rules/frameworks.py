"""NPU520-NPU522: training frameworks that select CUDA by name.

NPU520 (report): PyTorch Lightning / Fabric `accelerator="cuda"|"gpu"`, `gpus=` and
`CUDAAccelerator`. Lightning ships no NPU accelerator of its own (its documented accelerators
are cpu, cuda/gpu, mps and tpu), so there is nothing exact to rewrite to: the report gives the
route (a custom `Accelerator` backed by `torch.npu`, Lightning's "add a new accelerator" API).

NPU521 (rewrite): the process-group backend of Lightning strategies,
`DDPStrategy(process_group_backend="nccl")` (also FSDP/DeepSpeed strategies), becomes "hccl".

NPU522 (rewrite): Hugging Face `TrainingArguments(no_cuda=...)` becomes `use_cpu=...` (the
device-neutral spelling transformers >= 4.34 uses; `no_cuda` is deprecated there).
`device_map="cuda"` is a device position for NPU103 (data/device_positions_frameworks.json).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix, Rule
from npu_migrate.core.diagnostics import Severity

_LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
_ENTRY_POINTS = frozenset({"Trainer", "Fabric"})
_STRATEGIES = frozenset({"DDPStrategy", "FSDPStrategy", "DeepSpeedStrategy", "DDPSpawnStrategy",
                         "ModelParallelStrategy"})
_CUDA_ACCELERATORS = frozenset({"cuda", "gpu"})
_ROUTE = ("Lightning has no built-in NPU accelerator: register one (subclass "
          "`lightning.pytorch.accelerators.Accelerator` on top of torch.npu, Lightning's \"add a new "
          "accelerator\" guide) and pass it as `accelerator=`; with DDP also pass "
          "`strategy=DDPStrategy(process_group_backend=\"hccl\")`")


def _lightning(qualified: str | None, names: frozenset[str]) -> bool:
    if not qualified:
        return False
    parts = qualified.split(".")
    return parts[0] in _LIGHTNING_ROOTS and parts[-1] in names


def _branches(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values an expression can take: both branches of `a if c else b`, else itself."""
    if isinstance(node, cst.IfExp):
        return _branches(node.body) + _branches(node.orelse)
    return [node]


def _text(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


class LightningAccelerator(Rule):
    code = "NPU520"
    name = "lightning-cuda-accelerator"
    summary = "Lightning/Fabric `accelerator=\"cuda\"|\"gpu\"`, `gpus=` and `CUDAAccelerator` are reported with the NPU route"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = r"accelerator\s*=|gpus\s*=|CUDAAccelerator"  # no leading \b: literals scan fast

    def visit_Call(self, node: cst.Call) -> None:
        if not _lightning(self.resolve(node.func), _ENTRY_POINTS):
            return
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword else None
            chosen = [_text(v) for v in _branches(arg.value)]
            cuda = [c for c in chosen if (c or "").lower() in _CUDA_ACCELERATORS]
            if keyword == "accelerator" and cuda:
                self.report(arg, f"`accelerator={cuda[0]!r}` selects CUDA: {_ROUTE}")
            elif keyword == "gpus":
                self.report(arg, f"`gpus=` (Lightning < 2.0) selects CUDA devices: {_ROUTE}")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "CUDAAccelerator" and _lightning(self.resolve(node), frozenset({"CUDAAccelerator"})):
            self.report(node, f"`CUDAAccelerator` runs on CUDA only: {_ROUTE}")

    def visit_Name(self, node: cst.Name) -> None:
        if (node.value == "CUDAAccelerator" and not self.context.in_import
                and _lightning(self.resolve(node), frozenset({"CUDAAccelerator"}))):
            self.report(node, f"`CUDAAccelerator` runs on CUDA only: {_ROUTE}")


class LightningBackend(Rule):
    code = "NPU521"
    name = "lightning-strategy-backend"
    summary = "`process_group_backend=\"nccl\"` of Lightning strategies becomes \"hccl\""
    fix = Fix.SAFE
    prefilter = r"process_group_backend"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if not _lightning(self.resolve(original_node.func), _STRATEGIES):
            return updated_node
        args, changed = list(updated_node.args), False
        for i, arg in enumerate(updated_node.args):
            if arg.keyword and arg.keyword.value == "process_group_backend" and _text(arg.value) == "nccl":
                value = arg.value
                assert isinstance(value, cst.SimpleString)
                args[i] = arg.with_changes(value=value.with_changes(value=value.value.replace("nccl", "hccl")))
                self.fixed(original_node.args[i], "`process_group_backend=\"nccl\"` → \"hccl\"")
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node


class HuggingFaceNoCuda(Rule):
    code = "NPU522"
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

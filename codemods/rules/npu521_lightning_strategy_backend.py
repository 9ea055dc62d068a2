"""NPU521: the lightning-strategy-backend rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.analyses.portable import require_device
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.api.targets import version_allows
from codemods.families.lightning import lightning_name, text_of
from codemods.model.cstnodes import code_of, dotted_expr

_STRATEGIES = frozenset({"DDPStrategy", "FSDPStrategy", "DeepSpeedStrategy", "DDPSpawnStrategy",
                         "ModelParallelStrategy"})


class LightningBackend(Rule):
    """## What it does

    `process_group_backend="nccl"` of Lightning's DDP/FSDP/DeepSpeed strategies becomes `"hccl"`.

    ## Why

    Lightning's strategies take the torch.distributed backend by name; on Ascend it is HCCL.

    ## Example

    ```python
    # before
    from lightning.pytorch.strategies import DDPStrategy
    s = DDPStrategy(process_group_backend="nccl")
    # after
    from lightning.pytorch.strategies import DDPStrategy
    s = DDPStrategy(process_group_backend="hccl")
    ```

    ## Fix safety

    Safe: the backend torch_npu registers for NPU collectives.
    Suppress with `# npu-migrate: ignore[NPU521]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `process_group_backend="nccl"` becomes `torch.distributed.get_default_backend_for_device(DEVICE)` (torch >= 2.6; else reported)
    """

    code = "NPU521"
    supported_targets = frozenset({"npu", "portable"})
    name = "lightning-strategy-backend"
    summary = "`process_group_backend=\"nccl\"` of Lightning strategies becomes \"hccl\""
    fix = Fix.SAFE
    prefilter = r"process_group_backend\s*=\s*[\"']nccl[\"']"  # only the literal is rewritten

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if not lightning_name(self.resolve(original_node.func), _STRATEGIES):
            return updated_node
        args, changed = list(updated_node.args), False
        for i, arg in enumerate(updated_node.args):
            if arg.keyword and arg.keyword.value == "process_group_backend" and text_of(arg.value) == "nccl":
                value = arg.value
                assert isinstance(value, cst.SimpleString)
                new = self._portable(original_node.args[i]) if self.target == "portable" else \
                    value.with_changes(value=value.value.replace("nccl", "hccl"))
                if new is None:
                    continue
                args[i] = arg.with_changes(value=new)
                self.fixed(original_node.args[i], f"`process_group_backend=\"nccl\"` → `{code_of(new)}`")
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node


    def _portable(self, arg: cst.Arg) -> cst.BaseExpression | None:
        """The device's default backend (nccl on CUDA, hccl on Ascend, gloo on CPU)."""
        api = "torch.distributed.get_default_backend_for_device"
        device = require_device(self.context) if version_allows(self.context.options, api) else None
        if device is None:
            self.report(arg, f"`process_group_backend=\"nccl\"`: under --target portable use `{api}(DEVICE)` by hand")
            return None
        return cst.Call(func=dotted_expr(api), args=[cst.Arg(device)])


CASES = [
    Invalid(
        """\
import torch
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend="nccl")
""",
        after="""\
import torch
from lightning.pytorch.strategies import DDPStrategy
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
s = DDPStrategy(process_group_backend=torch.distributed.get_default_backend_for_device(DEVICE))
""",
        codes=("NPU100", "NPU521"),
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend="nccl")
""",
        after="""\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend="hccl")
""",
    ),
    Valid(
        """\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend="gloo")
""",
    ),
    Invalid(
        """\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend='nccl')
""",
        after="""\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend='hccl')
""",
    ),
]

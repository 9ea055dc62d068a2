"""NPU521: the lightning-strategy-backend rule."""

from __future__ import annotations

from typing import Any
import libcst as cst
from codemods.framework.base import Fix, Rule
from codemods.framework.families.lightning import lightning_name, text_of

from codemods.framework.cases import Invalid, Valid


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
    - **portable**: not yet
    """

    code = "NPU521"
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
                args[i] = arg.with_changes(value=value.with_changes(value=value.value.replace("nccl", "hccl")))
                self.fixed(original_node.args[i], "`process_group_backend=\"nccl\"` → \"hccl\"")
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node


CASES = [
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
]

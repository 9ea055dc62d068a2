"""NPU143: the process-group-nccl rule."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.distributed import DistRule


class ProcessGroupNccl(DistRule):
    """## What it does

    `ProcessGroupNCCL` is reported: torch_npu's class is `ProcessGroupHCCL`

    ## Why

    Code that builds NCCL process groups or their options directly
    (`dist.ProcessGroupNCCL.Options()`, `is_high_priority_stream`, NCCL config fields) has no
    drop-in replacement: torch_npu's class is `torch_npu._C._distributed_c10d.ProcessGroupHCCL`,
    with its own options (`hccl_config` sets the buffer size). `transfer_to_npu` aliases the name
    only from 26.x, and the option fields differ, so the rule reports and does not rewrite.

    ## Example

    ```python
    opts = dist.ProcessGroupNCCL.Options()
    # NPU143 `torch.distributed.ProcessGroupNCCL` does not exist on NPU: torch_npu's counterpart is
    #        torch_npu._C._distributed_c10d.ProcessGroupHCCL ...
    ```

    ## Fix safety

    Diagnostic only. Suppress with `# npu-migrate: ignore[NPU143]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU143"
    supported_targets = frozenset({"npu", "portable"})
    name = "process-group-nccl"
    summary = "`ProcessGroupNCCL` is reported: torch_npu's class is `ProcessGroupHCCL`"
    fix = Fix.NONE
    needs_torch_npu = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "ProcessGroupNCCL":
            self.tree.nodes("attrs").add(node.attr)
            self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "ProcessGroupNCCL" and node not in self.tree.nodes("attrs"):
            self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        qualified = self.resolve(node)
        if qualified in self.table.flags:
            self.report(node, f"`{qualified}` does not exist on NPU: {self.table.flags[qualified]}")


CASES = [
    Invalid(
        """\
from torch.distributed import ProcessGroupNCCL
opts = ProcessGroupNCCL.Options()
""",
    ),
]

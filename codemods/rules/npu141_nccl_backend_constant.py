"""NPU141: the nccl-backend-constant rule."""

from __future__ import annotations

import libcst as cst

from codemods.framework.cases import Invalid, Valid
from codemods.framework.families.distributed import DistRule
from codemods.framework.nodes import code_of


class NcclBackendConstant(DistRule):
    """## What it does

    `Backend.NCCL` becomes `Backend.HCCL` (defined when torch_npu registers hccl)

    ## Why

    `torch.distributed.Backend.NCCL` is the string `"nccl"`, and `transfer_to_npu` does not patch it
    (fact sheet §1.4). torch_npu registers its backend with `Backend.register_backend("hccl", ...)`,
    which also defines the attribute `Backend.HCCL == "hccl"`, so the constant keeps the user's style.

    ## Example

    ```python
    # before
    dist.init_process_group(dist.Backend.NCCL)
    # after
    dist.init_process_group(dist.Backend.HCCL)
    ```

    ## Fix safety

    Safe once torch_npu is imported (NPU100 adds the import); before that `Backend.HCCL` does not
    exist. Suppress with `# npu-migrate: ignore[NPU141]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU141"
    name = "nccl-backend-constant"
    summary = "`Backend.NCCL` becomes `Backend.HCCL` (defined when torch_npu registers hccl)"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "NCCL":
            return updated_node
        qualified = self.resolve(original_node)
        new = self.table.constants.get(qualified or "")
        if new is None:
            return updated_node
        new_node = updated_node.with_changes(attr=cst.Name(new))
        self.fixed(original_node, f"`{code_of(original_node)}` → `{code_of(new_node)}`")
        return new_node


CASES = [
    Invalid(
        """\
import torch.distributed as dist
backend = dist.Backend.NCCL
""",
        after="""\
import torch.distributed as dist
backend = dist.Backend.HCCL
""",
    ),
    Valid(
        """\
import torch.distributed as dist
backend = dist.Backend.HCCL
""",
    ),
]

"""NPU141: the nccl-backend-constant rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.portable import require_device
from codemods.api.cases import Invalid, Valid
from codemods.api.targets import version_allows
from codemods.families.distributed import DistRule
from codemods.model.cstnodes import code_of, dotted_expr


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
    - **portable**: `Backend.NCCL` becomes `torch.distributed.get_default_backend_for_device(DEVICE)` (torch >= 2.6; else reported)
    """

    code = "NPU141"
    supported_targets = frozenset({"npu", "portable"})
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
        if self.target == "portable":
            return self._portable(original_node, updated_node)
        new_node = updated_node.with_changes(attr=cst.Name(new))
        self.fixed(original_node, f"`{code_of(original_node)}` → `{code_of(new_node)}`")
        return new_node


    def _portable(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        """`Backend.NCCL` -> the device's default backend (nccl, hccl or gloo)."""
        api = "torch.distributed.get_default_backend_for_device"
        device = require_device(self.context) if version_allows(self.context.options, api) else None
        if device is None:
            self.report(original, f"`{code_of(original)}`: under --target portable use `{api}(DEVICE)` by hand")
            return updated
        self.fixed(original, f"`{code_of(original)}` → `{api}(DEVICE)` (the device's own backend)")
        return cst.Call(func=dotted_expr(api), args=[cst.Arg(device)])


CASES = [
    Invalid(
        """\
import torch
import torch.distributed as dist
dist.init_process_group(dist.Backend.NCCL)
""",
        after="""\
import torch
import torch.distributed as dist
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
dist.init_process_group(torch.distributed.get_default_backend_for_device(DEVICE))
""",
        codes=("NPU100", "NPU141"),
        options=(("target", "portable"),),
    ),
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
    Invalid(
        """\
from torch.distributed import Backend
b = Backend.NCCL
""",
        after="""\
from torch.distributed import Backend
b = Backend.HCCL
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group(dist.Backend.NCCL)
""",
        after="""\
import torch.distributed as dist
dist.init_process_group(dist.Backend.HCCL)
""",
    ),
]

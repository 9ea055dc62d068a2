"""NPU142: the is-nccl-available rule."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.distributed import DistRule


class IsNcclAvailable(DistRule):
    """## What it does

    `torch.distributed.is_nccl_available` becomes `is_hccl_available`

    ## Why

    NCCL is never available on an NPU machine, so code guarded by `is_nccl_available()` falls back
    to gloo or skips its distributed path. `import torch_npu` adds
    `torch.distributed.is_hccl_available`, and `transfer_to_npu` aliases the NCCL name to it.

    ## Example

    ```python
    # before
    from torch.distributed import is_nccl_available
    backend = "nccl" if is_nccl_available() else "gloo"
    # after (the string by NPU140)
    from torch.distributed import is_hccl_available
    backend = "hccl" if is_hccl_available() else "gloo"
    ```

    An alias keeps its local name: `from torch.distributed import is_nccl_available as ok` becomes
    `from torch.distributed import is_hccl_available as ok`.

    ## Fix safety

    Safe once torch_npu is imported (NPU100 adds it). Suppress with `# npu-migrate: ignore[NPU142]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU142"
    name = "is-nccl-available"
    summary = "`torch.distributed.is_nccl_available` becomes `is_hccl_available`"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "is_nccl_available":
            return updated_node
        new = self.table.renames.get(self.resolve(original_node) or "")
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        return updated_node.with_changes(attr=cst.Name(new))

    def leave_ImportAlias(self, original_node: cst.ImportAlias,
                          updated_node: cst.ImportAlias) -> cst.ImportAlias:
        # `from torch.distributed import is_nccl_available [as x]`: keep the local name working
        if not (isinstance(updated_node.name, cst.Name) and updated_node.name.value == "is_nccl_available"):
            return updated_node
        local = (updated_node.asname.name.value if updated_node.asname is not None
                 and isinstance(updated_node.asname.name, cst.Name) else "is_nccl_available")
        new = self.table.renames.get(self.context.facts.aliases.get(local, ""))
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        if local == "is_nccl_available":
            return updated_node.with_changes(name=cst.Name(new), asname=None)
        return updated_node.with_changes(name=cst.Name(new))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        # the bare uses of `from torch.distributed import is_nccl_available`
        if updated_node.value != "is_nccl_available" or self.context.in_import or original_node in self.tree.nodes("attrs"):
            return updated_node
        new = self.table.renames.get(self.context.facts.aliases.get("is_nccl_available", ""))
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        return updated_node.with_changes(value=new)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "is_nccl_available":  # `x.is_nccl_available`: the attribute's own Name
            self.tree.nodes("attrs").add(node.attr)


CASES = [
    Invalid(
        """\
import os
import torch
from torch.distributed import is_nccl_available
backend = "nccl" if is_nccl_available() else "gloo"
""",
        after="""\
import os
import torch
from torch.distributed import is_hccl_available
backend = "nccl" if is_hccl_available() else "gloo"
""",
    ),
    Valid(
        """\
import os
import torch
from torch.distributed import is_hccl_available
backend = "nccl" if is_hccl_available() else "gloo"
""",
    ),
    Invalid(
        """\
from torch.distributed import is_nccl_available
self.backend: str = 'nccl' if is_nccl_available() else 'gloo'
""",
        after="""\
from torch.distributed import is_hccl_available
self.backend: str = 'hccl' if is_hccl_available() else 'gloo'
""",
        codes=('NPU140', 'NPU142'),
        with_rules=('NPU140',),
    ),
    Invalid(
        """\
import torch.distributed as dist
if dist.is_nccl_available():
    pass
""",
        after="""\
import torch.distributed as dist
if dist.is_hccl_available():
    pass
""",
    ),
    Invalid(
        """\
from torch.distributed import is_nccl_available
ok = is_nccl_available()
""",
        after="""\
from torch.distributed import is_hccl_available
ok = is_hccl_available()
""",
    ),
    Invalid(
        """\
from torch.distributed import is_nccl_available as ok
x = ok()
""",
        after="""\
from torch.distributed import is_hccl_available as ok
x = ok()
""",
    ),
]

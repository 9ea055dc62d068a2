"""NPU153: the device-ids-list rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.analyses.devices import device_collection
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import code_of

# data-parallel wrappers whose `device_ids` (keyword, or this position) is a list of devices
_DEVICE_IDS = {"torch.nn.parallel.DistributedDataParallel": 1, "torch.nn.parallel.distributed.DistributedDataParallel": 1,
               "torch.nn.DataParallel": 1, "torch.nn.parallel.DataParallel": 1,
               "torch.nn.parallel.data_parallel": 2}


class DeviceIdsList(CoverageRule):
    """## What it does

    CUDA device strings inside DDP/DataParallel `device_ids=[...]` lists become NPU ones

    ## Why

    `DistributedDataParallel(device_ids=[...])` and `DataParallel(module, device_ids, output_device)`
    take a list of devices. Integer ids need no change on NPU, but string ids (`"cuda:0"`,
    `f"cuda:{rank}"`) name CUDA devices. `transfer_to_npu` rewrites them only in a `device_ids=`
    keyword list (tuples only from its master branch) and never in a positional list (fact sheet §1.8).
    The rule rewrites each plain CUDA device string of the list or tuple, keyword or positional, for
    `DistributedDataParallel`, `DataParallel` and `torch.nn.parallel.data_parallel`.
    `torch.device(...)` elements are NPU103's, as is `output_device` (a device position of
    `codemods/data/device_positions_extra.json`).

    ## Example

    ```python
    # before
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(model, device_ids=[f"cuda:{rank}"], output_device=f"cuda:{rank}")
    # after
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(model, device_ids=[f"npu:{rank}"], output_device=f"npu:{rank}")
    ```

    ## Fix safety

    Safe: only exact `cuda`/`cuda:N` strings (and `f"cuda:{i}"`) are rewritten; other elements are
    left as they are. Suppress a line with `# npu-migrate: ignore[NPU153]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU153"
    name = "device-ids-list"
    summary = "CUDA device strings inside DDP/DataParallel `device_ids=[...]` lists become NPU ones"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"""device_ids|(?:DataParallel|data_parallel)\s*\([^)]*[\[(]\s*f?['"]cuda"""
    gate_names = frozenset(_DEVICE_IDS)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        position = _DEVICE_IDS.get(self.resolve(original_node.func) or "")
        if position is None or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        index = 0
        for i, arg in enumerate(args):
            if arg.star:
                return updated_node
            hit = arg.keyword.value == "device_ids" if arg.keyword else index == position
            index += arg.keyword is None
            if hit and isinstance(arg.value, (cst.List, cst.Tuple)):
                new = device_collection(arg.value)
                if new is not None:
                    self.fixed(original_node.args[i].value,
                               f"`{code_of(arg.value)}` → `{code_of(new)}` (device_ids)")
                    args[i] = arg.with_changes(value=new)
                    return updated_node.with_changes(args=args)
        return updated_node


CASES = [
    Invalid(
        """\
import torch
model = torch.nn.DataParallel(model, device_ids=["cuda:0", "cuda:1"])
""",
        after="""\
import torch
model = torch.nn.DataParallel(model, device_ids=["npu:0", "npu:1"])
""",
    ),
    Valid(
        """\
import torch
model = torch.nn.DataParallel(model, device_ids=[0, 1])
""",
    ),
]

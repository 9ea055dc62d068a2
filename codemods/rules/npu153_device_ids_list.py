"""NPU153: the device-ids-list rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework.base import Fix
from codemods.framework.devices import device_collection
from codemods.framework.namemap import CoverageRule
from codemods.framework.nodes import code_of

# data-parallel wrappers whose `device_ids` (keyword, or this position) is a list of devices
_DEVICE_IDS = {"torch.nn.parallel.DistributedDataParallel": 1, "torch.nn.parallel.distributed.DistributedDataParallel": 1,
               "torch.nn.DataParallel": 1, "torch.nn.parallel.DataParallel": 1,
               "torch.nn.parallel.data_parallel": 2}


class DeviceIdsList(CoverageRule):
    code = "NPU153"
    name = "device-ids-list"
    summary = "CUDA device strings inside DDP/DataParallel `device_ids=[...]` lists become NPU ones"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"""device_ids|(?:DataParallel|data_parallel)\s*\([^)]*[\[(]\s*f?['"]cuda"""

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


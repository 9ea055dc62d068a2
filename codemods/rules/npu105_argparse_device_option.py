"""NPU105: the argparse-device-option rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.devices import collection_mentions_cuda
from codemods.api.cases import Invalid, Valid
from codemods.families.device_strings import DeviceRule


class ArgparseDevice(DeviceRule):
    """## What it does

    `default=` and `choices=` of an argparse `--device` option name NPU devices

    ## Why

    Training scripts take the device from the command line: `--device cuda` by default, with
    `choices=["cuda", "cpu"]`. After the migration the default must be an NPU device, and the
    choices must accept it. An option counts as a device option when one of its flags or its
    `dest` is `device`, starts with `device_`/`device-` or ends with `_device`/`-device`
    (`--device`, `--device-type`, `--eval_device`). Help texts and flags such as `--no-cuda` stay.

    ## Example

    ```python
    # before
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda or cpu")
    # after
    parser.add_argument("--device", default="npu", choices=["npu", "cpu"], help="cuda or cpu")
    ```

    ## Fix safety

    Safe for the script itself; command lines and launch scripts that pass `--device cuda` must
    pass `--device npu` (the shell rules report hard-coded values). Suppress with
    `# npu-migrate: ignore[NPU105]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `default="cuda"` becomes `default=DEVICE.type` (the run's device, the CPU without an accelerator) and `choices=["cuda", "cpu"]` becomes `[DEVICE.type, "cpu"]` (the same set on a CUDA machine)
    """

    code = "NPU105"
    prefilter_in_code = True
    name = "argparse-device-option"
    summary = "`default=` and `choices=` of an argparse `--device` option name NPU devices"
    supported_targets = frozenset({"npu", "portable"})

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            return updated_node
        if not self._names_device(original_node) or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        changed = False
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.keyword is None or arg.keyword.value not in ("default", "choices", "const"):
                continue
            if not collection_mentions_cuda(arg.value):
                continue
            new = self.swap(orig.value, arg.value, f"`{arg.keyword.value}=` of a device option",
                            collection=arg.keyword.value == "choices")
            if new is not arg.value:
                args[i] = arg.with_changes(value=new)
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    @staticmethod
    def _names_device(call: cst.Call) -> bool:
        """An option whose flag (or dest) is about devices: `--device`, `--device-type`, ..."""
        for arg in call.args:
            value = arg.value
            if (arg.keyword is None or arg.keyword.value == "dest") and isinstance(value, cst.SimpleString):
                flag = value.raw_value.lstrip("-").replace("-", "_").lower()
                if flag == "device" or flag.startswith("device_") or flag.endswith("_device"):
                    return True
        return False


CASES = [
    Invalid(
        """\
import torch
parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda or cpu")
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
parser.add_argument("--device", default=DEVICE.type, choices=[DEVICE.type, "cpu"], help="cuda or cpu")
""",
        codes=("NPU100", "NPU105"),
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda or cpu")
""",
        after="""\
import os
import torch
parser.add_argument("--device", default="npu", choices=["npu", "cpu"], help="cuda or cpu")
""",
    ),
    Valid(
        """\
import os
import torch
parser.add_argument("--device", default="npu", choices=["npu", "cpu"], help="cuda or cpu")
""",
    ),
    Invalid(
        """\
p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda or cpu")
""",
        after="""\
p.add_argument("--device", default="npu", choices=["npu", "cpu"], help="cuda or cpu")
""",
    ),
    Invalid(
        """\
p.add_argument('-d', '--device_type', type=str, default='cuda')
""",
        after="""\
p.add_argument('-d', '--device_type', type=str, default='npu')
""",
    ),
]

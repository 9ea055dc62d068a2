"""NPU104: the device-comparison rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.constantflow import binds_in_scope, kept_device_bindings
from codemods.analyses.devices import collection_mentions_cuda, is_device_name, mentions_cuda
from codemods.api.cases import Invalid, Valid
from codemods.api.positions import node_positions
from codemods.api.rule import RuleContext
from codemods.families.device_strings import DeviceRule
from codemods.model.cstnodes import code_of

_COMPARE = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


class DeviceComparison(DeviceRule):
    """## What it does

    Comparisons of devices with `"cuda"` (`x.device.type == "cuda"`) compare with `"npu"`

    ## Why

    On an NPU, `x.device.type` is `"npu"`: a comparison with `"cuda"` becomes silently False and
    the CUDA branch (or the fallback) is taken without any error. `transfer_to_npu` does not
    touch comparisons (fact sheet §1.6).

    A comparison is rewritten when one side is a device string (or a tuple/list/set of them, for
    `in`) and the other side is spelled as a device: a name from the device table's `names`
    (`device`, `device_type`, `dev`, `device_str`), such an attribute (`self.device`, `args.device`),
    `<...dev...>.type` (`x.device.type`, `torch.device(d).type`) or `str(...)` of one. The same holds
    for `str(device).startswith("cuda")`. Other comparisons with `"cuda"` are NPU191's to report.

    A module-level name the file sets to a CUDA string that stays as written (NPU190 or NPU500
    report it: some use of it is not a device) is not compared with `"npu"`: the comparison would
    no longer match the value. It is reported and left alone.

    ## Example

    ```python
    # before
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    use_amp = args.device in ("cuda", "xpu")
    # after
    if x.device.type == "npu":
        torch.npu.synchronize()
    use_amp = args.device in ("npu", "xpu")
    ```

    ## Fix safety

    Safe when the compared value comes from the migrated code (a tensor's device, or a `--device`
    option NPU105 migrated): both sides then name the NPU. Suppress with
    `# npu-migrate: ignore[NPU104]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `x.type == "cuda"` becomes `x.type != "cpu"` (and `!=` becomes `== "cpu"`), `"cuda" in device` becomes `"cpu" not in device`: "on an accelerator", false on CPU as before; other CUDA comparisons are reported
    """

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._kept: dict[str, int] | None = None

    code = "NPU104"
    prefilter_in_code = True
    name = "device-comparison"
    supported_targets = frozenset({"npu", "portable"})
    summary = "Comparisons of devices with `\"cuda\"` (`x.device.type == \"cuda\"`) compare with `\"npu\"`"

    def leave_Comparison(self, original_node: cst.Comparison,
                         updated_node: cst.Comparison) -> cst.BaseExpression:
        if len(updated_node.comparisons) != 1 or len(original_node.comparisons) != 1:
            return updated_node
        target = updated_node.comparisons[0]
        if not isinstance(target.operator, _COMPARE):
            return updated_node
        left, right = updated_node.left, target.comparator
        names = self.table.names
        if self.target == "portable":
            return self._portable(original_node, updated_node)
        if self._kept_cuda(original_node.left if is_device_name(original_node.left, names)
                           else original_node.comparisons[0].comparator, original_node):
            return updated_node
        if is_device_name(original_node.left, names) and collection_mentions_cuda(right):
            new = self.swap(original_node.comparisons[0].comparator, right, "a device comparison",
                            collection=True)
            if new is not right:
                return updated_node.with_changes(comparisons=[target.with_changes(comparator=new)])
        elif is_device_name(original_node.comparisons[0].comparator, names) and collection_mentions_cuda(left):
            new = self.swap(original_node.left, left, "a device comparison", collection=True)
            if new is not left:
                return updated_node.with_changes(left=new)
        return updated_node

    def _kept_cuda(self, side: cst.BaseExpression, comparison: cst.Comparison) -> bool:
        """`device == "cuda"` where this file sets the module-level `device` to a CUDA string no
        rule rewrites (NPU190 or NPU500 report it instead): comparing with "npu" would no longer
        match the value, a half-migration. Reported and left as written."""
        if isinstance(side, cst.Call) and isinstance(side.func, cst.Name) and side.func.value == "str" \
                and len(side.args) == 1:
            side = side.args[0].value
        if not isinstance(side, cst.Name) or not (collection_mentions_cuda(comparison.left)
                                                  or collection_mentions_cuda(comparison.comparisons[0].comparator)):
            return False
        if self._kept is None:
            self._kept = self.context.model.derived(kept_device_bindings, self.table)
        line = self._kept.get(side.value)
        module = self.context.module
        if line is None or module is None:
            return False
        here = node_positions(module, [comparison])[id(comparison)][0] + self.context.line_offset
        if binds_in_scope(self.context.facts.tree, here, side.value):
            return False
        self.report(comparison, f"`{code_of(comparison)}`: `{side.value}` is set to a CUDA device at line {line}, "
                                "which stays as written (see the report there): comparing with \"npu\" would no "
                                "longer match it; settle that value, then compare with \"npu\"")
        return True

    def _portable(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        """`x.type == "cuda"` asks "on an accelerator?": `x.type != "cpu"` asks it of any device
        (and stays False on CPU, as before)."""
        target = updated.comparisons[0]
        names = self.table.names
        if not (is_device_name(original.left, names) or is_device_name(original.comparisons[0].comparator, names)):
            return updated
        string = target.comparator if is_device_name(original.left, names) else updated.left
        if not collection_mentions_cuda(string):
            return updated
        current = target.operator
        if isinstance(current, (cst.In, cst.NotIn)) and string is updated.left:
            return self._portable_in(original, updated)
        flipped = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}.get(type(current))
        if flipped is None or not isinstance(current, (cst.Equal, cst.NotEqual)) or not (
                isinstance(string, cst.SimpleString) and string.evaluated_value == "cuda"):
            self.report(original, f"`{code_of(original)}`: a CUDA device test; under --target portable "
                                  "compare with \"cpu\" (or DEVICE.type) by hand")
            return updated
        operator = flipped(whitespace_before=current.whitespace_before,
                           whitespace_after=current.whitespace_after)
        cpu = string.with_changes(value=string.value.replace("cuda", "cpu"))
        self.fixed(original, f"`{code_of(original)}` → accelerator test against \"cpu\"")
        if string is target.comparator:
            return updated.with_changes(comparisons=[target.with_changes(operator=operator, comparator=cpu)])
        return updated.with_changes(left=cpu, comparisons=[target.with_changes(operator=operator)])

    def _portable_in(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        """`"cuda" in device` (a device string) asks "on an accelerator?" too: `"cpu" not in
        device` (False for "cpu", as before; True for "cuda:0", "npu:1")."""
        target = updated.comparisons[0]
        string = updated.left
        if not (isinstance(string, cst.SimpleString) and string.evaluated_value == "cuda"):
            self.report(original, f"`{code_of(original)}`: a CUDA device test; under --target portable "
                                  "compare with \"cpu\" (or DEVICE.type) by hand")
            return updated
        current = target.operator
        if isinstance(current, cst.In):
            operator: cst.BaseCompOp = cst.NotIn(whitespace_before=current.whitespace_before,
                                                 whitespace_after=current.whitespace_after)
        else:
            assert isinstance(current, cst.NotIn)
            operator = cst.In(whitespace_before=current.whitespace_before,
                              whitespace_after=current.whitespace_after)
        self.fixed(original, f"`{code_of(original)}` → accelerator test against \"cpu\"")
        return updated.with_changes(left=string.with_changes(value=string.value.replace("cuda", "cpu")),
                                    comparisons=[target.with_changes(operator=operator)])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        """`str(x.device).startswith("cuda")`."""
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "startswith"
                and len(updated_node.args) == 1 and updated_node.args[0].keyword is None
                and mentions_cuda(updated_node.args[0].value)):
            return updated_node
        original_func = original_node.func
        assert isinstance(original_func, cst.Attribute)
        if not is_device_name(original_func.value, self.table.names):
            return updated_node
        arg = updated_node.args[0]
        new = self.swap(original_node.args[0].value, arg.value, "a device prefix test", collection=True)
        return updated_node.with_changes(args=[arg.with_changes(value=new)]) if new is not arg.value \
            else updated_node


CASES = [
    Invalid(
        """\
import torch
use_amp = device.type == "cuda"
on_cpu = device.type != "cuda"
""",
        after="""\
import torch
use_amp = device.type != "cpu"
on_cpu = device.type == "cpu"
""",
        options=(("target", "portable"),),
    ),
    Invalid(  # a device string: "on an accelerator?" without naming one
        """\
import torch
device_type = "cuda" if "cuda" in device else "cpu"
pinned = "cuda" not in args.device
""",
        after="""\
import torch
device_type = "cuda" if "cpu" not in device else "cpu"
pinned = "cpu" in args.device
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import torch
ok = device.type in ("cuda", "xpu")
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
if x.device.type == "cuda":
    torch.cuda.synchronize()
use_amp = args.device in ("cuda", "xpu")
""",
        after="""\
import os
import torch
if x.device.type == "npu":
    torch.cuda.synchronize()
use_amp = args.device in ("npu", "xpu")
""",
    ),
    Invalid(  # the module-level value stays "cuda" (NPU190 reports it): the test must keep matching it
        """\
import torch
device = "cuda"
open(device + ".txt")
def f(x):
    if device == "cuda":
        return x.to(device)
def g(x, device):
    return device == "cuda"
""",
        after="""\
import torch
device = "cuda"
open(device + ".txt")
def f(x):
    if device == "cuda":
        return x.to(device)
def g(x, device):
    return device == "npu"
""",
    ),
    Valid(
        """\
import os
import torch
if x.device.type == "npu":
    torch.cuda.synchronize()
use_amp = args.device in ("npu", "xpu")
""",
    ),
    Invalid(
        """\
if x.device.type == "cuda":
    pass
""",
        after="""\
if x.device.type == "npu":
    pass
""",
    ),
    Invalid(
        """\
ok = "cuda" != t.device.type
""",
        after="""\
ok = "npu" != t.device.type
""",
    ),
    Invalid(
        """\
ok = device in ('cuda', 'cpu')
""",
        after="""\
ok = device in ('npu', 'cpu')
""",
    ),
    Invalid(
        """\
ok = args.device == "cuda:0"
""",
        after="""\
ok = args.device == "npu:0"
""",
    ),
    Invalid(
        """\
ok = str(device).startswith("cuda")
""",
        after="""\
ok = str(device).startswith("npu")
""",
    ),
    Invalid(
        """\
ok = torch.device(d).type == "cuda"
""",
        after="""\
ok = torch.device(d).type == "npu"
""",
    ),
    Invalid(
        """\
ok = self.dev.type == "cuda"
""",
        after="""\
ok = self.dev.type == "npu"
""",
    ),
]

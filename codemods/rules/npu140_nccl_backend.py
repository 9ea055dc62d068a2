"""NPU140: the nccl-backend rule."""

from __future__ import annotations

import re

import libcst as cst

from codemods.analyses.portable import require_device
from codemods.api.cases import Invalid, Valid
from codemods.api.targets import version_allows
from codemods.families.distributed import DistRule, DistTable
from codemods.model.cstnodes import code_of, dotted_expr

_PAIR = re.compile(r"(\w+):(\w+)")


_COMPARE = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


def backend_text(text: str, table: DistTable) -> str | None:
    """'nccl' -> 'hccl'; 'cuda:nccl,cpu:gloo' -> 'npu:hccl,cpu:gloo'; None when not a backend
    string with something to change."""
    if text in table.backends:
        return table.backends[text]
    if text.upper() != text and text.lower() in table.backends:
        return None  # odd casing: leave it
    if text.isupper() and text.lower() in table.backends:
        return table.backends[text.lower()].upper()
    pairs = text.split(",")
    out = []
    for pair in pairs:
        match = _PAIR.fullmatch(pair.strip())
        if not match:
            return None
        device, backend = match.groups()
        out.append(pair.replace(f"{device}:{backend}", f"{table.devices.get(device, device)}:"
                                                        f"{table.backends.get(backend, backend)}"))
    new = ",".join(out)
    return new if new != text else None


def backend_expr(node: cst.BaseExpression, table: DistTable) -> cst.BaseExpression | None:
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        new = backend_text(node.raw_value, table)
        return node.with_changes(value=f"{node.prefix}{node.quote}{new}{node.quote}") if new else None
    if isinstance(node, cst.IfExp):
        body, orelse = backend_expr(node.body, table), backend_expr(node.orelse, table)
        if body is None and orelse is None:
            return None
        return node.with_changes(body=body or node.body, orelse=orelse or node.orelse)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        elements, changed = [], False
        for element in node.elements:
            new_value = backend_expr(element.value, table) if isinstance(element, cst.Element) else None
            changed |= new_value is not None
            elements.append(element.with_changes(value=new_value) if new_value is not None else element)
        return node.with_changes(elements=elements) if changed else None
    return None


def _mentions_nccl(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return "nccl" in node.value.lower()
    if isinstance(node, cst.IfExp):
        return _mentions_nccl(node.body) or _mentions_nccl(node.orelse)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(isinstance(e, cst.Element) and _mentions_nccl(e.value) for e in node.elements)
    return False


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name) and node.func.value == "str" and len(node.args) == 1:
            return _last_name(node.args[0].value)
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def _is_nccl(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and node.value.strip("\"'") == "nccl"


class NcclBackend(DistRule):
    """## What it does

    `"nccl"` backends (init_process_group, new_group, comparisons, --dist-backend) become `"hccl"`

    ## Why

    The collective backend of Ascend is HCCL. `transfer_to_npu` rewrites the backend of
    `init_process_group` and `new_group` at run time, but with a substring replace that also hits
    init-method URLs, and it leaves comparisons such as `backend == "nccl"` alone: Huawei's own
    migration guide says to fix those by hand (fact sheet §1.4). This rule rewrites backend strings
    where they are backends:

    - the backend argument of `init_process_group` (position 0) and `new_group` (position 2), or
      their `backend=` keyword; `new_subgroups*`, `Backend("nccl")`;
    - `backend=` and `dist_backend=` keywords of any call (accelerate, DeepSpeed);
    - comparisons with an expression whose last name contains `backend` (`backend == "nccl"`,
      `dist.get_backend() in ("nccl", "gloo")`, `args.dist_backend != "nccl"`);
    - `default=`/`choices=` of argparse options whose flag contains `backend` (`--dist-backend`);
    - values given to names containing `backend`: assignments (`self.backend = "nccl"`), parameter
      defaults (`def setup(rank, backend="nccl")`) and dict entries (`{"dist_backend": "nccl"}`).

    Values: `"nccl"` → `"hccl"` (`"NCCL"` → `"HCCL"`) and per-device lists
    `"cuda:nccl,cpu:gloo"` → `"npu:hccl,cpu:gloo"`. A backend string it does not recognise
    (`"nccl+sharp"`) is reported. Mapping: `codemods/data/distributed.json`.

    ## Example

    ```python
    # before
    parser.add_argument("--dist-backend", default="nccl", choices=["nccl", "gloo"])
    dist.init_process_group("nccl", init_method="tcp://nccl-host:23456")
    if dist.get_backend() == "nccl":
        ...
    # after
    parser.add_argument("--dist-backend", default="hccl", choices=["hccl", "gloo"])
    dist.init_process_group("hccl", init_method="tcp://nccl-host:23456")
    if dist.get_backend() == "hccl":
        ...
    ```

    ## Fix safety

    Safe: `get_backend()` returns `"hccl"` on NPU, so the comparisons keep their meaning.
    Suppress with `# npu-migrate: ignore[NPU140]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `"nccl"` as the backend argument, `backend=`, a backend name's value or default (also as the branch of `"nccl" if ... else "gloo"`) becomes `torch.distributed.get_default_backend_for_device(DEVICE)` (torch >= 2.6: nccl on CUDA, hccl on Ascend, gloo on CPU); comparisons with "nccl" and other NCCL mentions are reported
    """

    code = "NPU140"
    prefilter_in_code = True
    name = "nccl-backend"
    supported_targets = frozenset({"npu", "portable"})
    summary = "`\"nccl\"` backends (init_process_group, new_group, comparisons, --dist-backend) become `\"hccl\"`"

    def _swap(self, original: cst.BaseExpression, updated: cst.BaseExpression,
              where: str) -> cst.BaseExpression:
        if self.target == "portable":
            return self._portable(original, updated, where)
        new = backend_expr(updated, self.table)
        if new is None:
            if isinstance(updated, cst.SimpleString) and "nccl" in updated.value.lower():
                self.report(original, f"`{code_of(original)}` in {where} mentions NCCL but is no "
                                      "backend string we know: port it to HCCL by hand")
            return updated
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` ({where})")
        return new

    def _portable(self, original: cst.BaseExpression, updated: cst.BaseExpression,
                  where: str) -> cst.BaseExpression:
        """Under --target portable a backend value names the device's default backend: the
        backend argument, `backend=`, a backend name's value or default, also as the `"nccl"`
        branch of `"nccl" if ... else "gloo"`. A comparison with "nccl" is reported (on CPU the
        default backend is gloo, so `backend == <default>` would turn true there)."""
        api = "torch.distributed.get_default_backend_for_device"
        values = ("the backend argument", "`backend=`", "an assignment to a backend name", "a backend parameter default")
        device = None
        if where in values and version_allows(self.context.options, api) and (
                _is_nccl(updated) or (isinstance(updated, cst.IfExp)
                                      and (_is_nccl(updated.body) or _is_nccl(updated.orelse)))):
            device = require_device(self.context)
        if device is None:
            self.report(original, f"`{code_of(original)}` in {where}: NCCL exists on CUDA only; under "
                                  f"--target portable use `{api}(DEVICE)` by hand")
            return updated
        default = cst.Call(func=dotted_expr(api), args=[cst.Arg(device)])
        new: cst.BaseExpression = default
        if isinstance(updated, cst.IfExp):
            new = updated.with_changes(body=default) if _is_nccl(updated.body) else updated.with_changes(orelse=default)
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` (the device's own backend)")
        return new

    def _backend_names(self, node: cst.BaseExpression) -> bool:
        last = _last_name(node)
        return last is not None and any(word in last.lower() for word in self.table.names)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not any(_mentions_nccl(a.value) for a in updated_node.args):
            return updated_node
        if len(original_node.args) != len(updated_node.args):
            return updated_node
        func = original_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            return self._argparse(original_node, updated_node)
        spec = self.table.functions.get(self.resolve(func) or "", {})
        position, keyword = spec.get("position"), spec.get("keyword")
        args = list(updated_node.args)
        changed = False
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.star:
                index = -1_000_000 if arg.star == "*" else index
                continue
            if arg.keyword is None:
                hit = index == position
                index += 1
            else:
                hit = arg.keyword.value == keyword or arg.keyword.value in self.table.keywords
            if hit and _mentions_nccl(arg.value):
                label = f"`{arg.keyword.value}=`" if arg.keyword else "the backend argument"
                new = self._swap(orig.value, arg.value, label)
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    def _argparse(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        flags = [a.value.raw_value for a in original.args
                 if (a.keyword is None or a.keyword.value == "dest") and isinstance(a.value, cst.SimpleString)]
        if not any(word in flag.lower() for flag in flags for word in self.table.names):
            return updated
        args = list(updated.args)
        changed = False
        for i, (orig, arg) in enumerate(zip(original.args, updated.args)):
            if arg.keyword is not None and arg.keyword.value in ("default", "choices", "const") \
                    and _mentions_nccl(arg.value):
                new = self._swap(orig.value, arg.value, f"`{arg.keyword.value}=` of a backend option")
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    changed = True
        return updated.with_changes(args=args) if changed else updated

    def leave_Comparison(self, original_node: cst.Comparison,
                         updated_node: cst.Comparison) -> cst.BaseExpression:
        if len(updated_node.comparisons) != 1 or len(original_node.comparisons) != 1:
            return updated_node
        target = updated_node.comparisons[0]
        if not isinstance(target.operator, _COMPARE):
            return updated_node
        original_right = original_node.comparisons[0].comparator
        if self._backend_names(original_node.left) and _mentions_nccl(target.comparator):
            new = self._swap(original_right, target.comparator, "a backend comparison")
            if new is not target.comparator:
                return updated_node.with_changes(comparisons=[target.with_changes(comparator=new)])
        elif self._backend_names(original_right) and _mentions_nccl(updated_node.left):
            new = self._swap(original_node.left, updated_node.left, "a backend comparison")
            if new is not updated_node.left:
                return updated_node.with_changes(left=new)
        return updated_node


    # -- names that hold a backend: `backend = "nccl"`, `def f(backend="nccl")`, {"backend": ...}
    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if not _mentions_nccl(updated_node.value) or not all(
                self._backend_names(t.target) for t in original_node.targets):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, "an assignment to a backend name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_AnnAssign(self, original_node: cst.AnnAssign,
                        updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if (updated_node.value is None or original_node.value is None
                or not _mentions_nccl(updated_node.value) or not self._backend_names(original_node.target)):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, "an assignment to a backend name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if (updated_node.default is None or original_node.default is None
                or not _mentions_nccl(updated_node.default) or not self._backend_names(updated_node.name)):
            return updated_node
        value = self._swap(original_node.default, updated_node.default, "a backend parameter default")
        return updated_node.with_changes(default=value) if value is not updated_node.default else updated_node

    def leave_DictElement(self, original_node: cst.DictElement,
                          updated_node: cst.DictElement) -> cst.DictElement:
        key = updated_node.key
        if not (isinstance(key, cst.SimpleString) and _mentions_nccl(updated_node.value)
                and any(word in key.raw_value.lower() for word in self.table.names)):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, f"the `{key.raw_value}` entry")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node


CASES = [
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group(backend="nccl")
""",
        after="""\
import torch
import torch.distributed as dist
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
dist.init_process_group(backend=torch.distributed.get_default_backend_for_device(DEVICE))
""",
        codes=("NPU100", "NPU140"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a backend setting and a conditional backend: the device's own
        """\
import torch
import torch.distributed as dist
backend = 'nccl'
dist.init_process_group(backend="nccl" if args.cuda else "gloo")
""",
        after="""\
import torch
import torch.distributed as dist
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
backend = torch.distributed.get_default_backend_for_device(DEVICE)
dist.init_process_group(backend=torch.distributed.get_default_backend_for_device(DEVICE) if args.cuda else "gloo")
""",
        codes=("NPU100", "NPU140"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a comparison: on CPU the default backend is gloo, so it would turn true there
        """\
import torch
ddp = backend == "nccl"
""",
        options=(("target", "portable"),),
    ),
    Invalid(  # torch 2.5 has no get_default_backend_for_device: reported
        """\
import torch.distributed as dist
dist.init_process_group(backend="nccl")
""",
        options=(("target", "portable"), ("target_version", "2.5")),
    ),
    Invalid(
        """\
import os
import torch
parser.add_argument("--dist-backend", default="nccl", choices=["nccl", "gloo"])
dist.init_process_group("nccl", init_method="tcp://nccl-host:23456")
if dist.get_backend() == "nccl":
    ...
""",
        after="""\
import os
import torch
parser.add_argument("--dist-backend", default="hccl", choices=["hccl", "gloo"])
dist.init_process_group("nccl", init_method="tcp://nccl-host:23456")
if dist.get_backend() == "hccl":
    ...
""",
    ),
    Invalid(  # fairscale's model-parallel groups and transformers' TrainingArguments name the backend too
        """\
import torch
from fairscale.nn.model_parallel.initialize import initialize_model_parallel
initialize_model_parallel(2, model_parallel_backend="nccl", pipeline_backend="nccl")
args = TrainingArguments(output_dir="out", ddp_backend="nccl")
""",
        after="""\
    import torch
    import torch_npu  # noqa: F401
    from fairscale.nn.model_parallel.initialize import initialize_model_parallel
    initialize_model_parallel(2, model_parallel_backend="hccl", pipeline_backend="hccl")
    args = TrainingArguments(output_dir="out", ddp_backend="hccl")
""",
        codes=("NPU100", "NPU140"),
        with_rules=("NPU100",),
    ),
    Valid(
        """\
import os
import torch
parser.add_argument("--dist-backend", default="hccl", choices=["hccl", "gloo"])
dist.init_process_group("nccl", init_method="tcp://nccl-host:23456")
if dist.get_backend() == "hccl":
    ...
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group("nccl")
""",
        after="""\
import torch.distributed as dist
dist.init_process_group("hccl")
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group('nccl', init_method='tcp://nccl-host:1')
""",
        after="""\
import torch.distributed as dist
dist.init_process_group('hccl', init_method='tcp://nccl-host:1')
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group(backend="nccl", rank=r)  # go
""",
        after="""\
import torch.distributed as dist
dist.init_process_group(backend="hccl", rank=r)  # go
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
dist.init_process_group(backend="cuda:nccl,cpu:gloo")
""",
        after="""\
import torch.distributed as dist
dist.init_process_group(backend="npu:hccl,cpu:gloo")
""",
    ),
    Invalid(
        """\
import torch
torch.distributed.init_process_group(
    backend='nccl' if torch.cuda.is_available() else 'gloo')
""",
        after="""\
import torch
torch.distributed.init_process_group(
    backend='hccl' if torch.cuda.is_available() else 'gloo')
""",
    ),
    Invalid(
        """\
from torch.distributed import init_process_group
init_process_group('nccl')
""",
        after="""\
from torch.distributed import init_process_group
init_process_group('hccl')
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
g = dist.new_group([0, 1], None, "nccl")
""",
        after="""\
import torch.distributed as dist
g = dist.new_group([0, 1], None, "hccl")
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
g = dist.new_group(ranks, backend="nccl")
""",
        after="""\
import torch.distributed as dist
g = dist.new_group(ranks, backend="hccl")
""",
    ),
    Invalid(
        """\
deepspeed.init_distributed(dist_backend="nccl")
""",
        after="""\
deepspeed.init_distributed(dist_backend="hccl")
""",
    ),
    Invalid(
        """\
kw = InitProcessGroupKwargs(backend="NCCL")
""",
        after="""\
kw = InitProcessGroupKwargs(backend="HCCL")
""",
    ),
    Invalid(
        """\
import torch.distributed as dist
if dist.get_backend() == "nccl":
    pass
""",
        after="""\
import torch.distributed as dist
if dist.get_backend() == "hccl":
    pass
""",
    ),
    Invalid(
        """\
ok = backend != "nccl"
""",
        after="""\
ok = backend != "hccl"
""",
    ),
    Invalid(
        """\
ok = "nccl" == args.dist_backend
""",
        after="""\
ok = "hccl" == args.dist_backend
""",
    ),
    Invalid(
        """\
ok = self.backend in ('nccl', 'gloo')
""",
        after="""\
ok = self.backend in ('hccl', 'gloo')
""",
    ),
    Invalid(
        """\
backend = "nccl"
""",
        after="""\
backend = "hccl"
""",
    ),
    Invalid(
        """\
def setup(rank, backend="nccl"):
    pass
""",
        after="""\
def setup(rank, backend="hccl"):
    pass
""",
    ),
    Invalid(
        """\
cfg = {'dist_backend': 'nccl', 'name': 'nccl'}
""",
        after="""\
cfg = {'dist_backend': 'hccl', 'name': 'nccl'}
""",
    ),
    Invalid(
        """\
p.add_argument("--dist-backend", default="nccl", choices=["nccl", "gloo"], help="nccl")
""",
        after="""\
p.add_argument("--dist-backend", default="hccl", choices=["hccl", "gloo"], help="nccl")
""",
    ),
    Invalid(
        """\
p.add_argument('--backend', type=str, default='nccl')
""",
        after="""\
p.add_argument('--backend', type=str, default='hccl')
""",
    ),
    Valid(
        """\
print("using nccl")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
p.add_argument("--use-nccl", action="store_true")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
os.environ["NCCL_DEBUG"] = "INFO"
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
import torch.distributed as dist
dist.init_process_group("gloo")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
import torch.distributed as dist
dist.init_process_group(init_method="file:///tmp/nccl")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
ok = kind == "nccl"
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
x = lib.Backend.NCCL
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
ok = mylib.is_nccl_available()
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
b = "nccl"
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
msg = {"text": "nccl"}
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
import torch.distributed as dist
dist.init_process_group(backend="hccl")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
    Valid(
        """\
p.add_argument("--device", default="nccl")
""",
        with_rules=('NPU141', 'NPU142', 'NPU143'),
    ),
]

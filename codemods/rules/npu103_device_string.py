"""NPU103: the device-string rule."""

from __future__ import annotations

import ast
import re

import libcst as cst

from codemods.analyses.devices import is_device_name, mentions_cuda
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import RuleContext
from codemods.families.device_strings import DeviceRule


class DeviceString(DeviceRule):
    """## What it does

    `"cuda"`/`"cuda:N"` device strings in device positions become `"npu"`/`"npu:N"`

    ## Why

    After `import torch_npu` the device is spelled `npu`; `"cuda"` devices fail on an NPU machine.
    `transfer_to_npu` rewrites every string *containing* `cuda` that reaches one of its wrapped
    functions, so `torch.load("/ckpt/cuda_model.pt")` loads `/ckpt/npu_model.pt`. This rule is exact:
    it rewrites only the strings `cuda` and `cuda:N` (also `f"cuda:{i}"`, `"cuda:%d" % i`,
    `"cuda:{}".format(i)`, `"cuda:" + str(i)`) and only where the code proves they are devices:

    - keyword arguments named in the device table in any call: `device=`, `device_type=`,
      `map_location=`, `device_id=` (and the keywords other families add, e.g. `output_device=`);
    - positional device arguments of known functions: `torch.device("cuda", i)`,
      `torch.set_default_device`, `torch.get_device_module`, the second argument of `torch.load`,
      `torch.cuda.set_device`, `torch.cuda.device` (aliases resolved);
    - the first argument of the methods `.to(...)`, `.cuda(...)`, `.pin_memory(...)`, whatever the receiver;
    - both branches of `... if torch.cuda.is_available() else ...`, wherever it stands;
    - names that hold devices: assignments inside functions and classes (`device = "cuda"`,
      `self.device = "cuda:0"`), parameter defaults (`def f(device="cuda")`), dict entries
      (`{"device": "cuda"}`). Module-level constants are NPU190's (it follows their uses).

    The table is `codemods/data/device_positions*.json` (every matching file is merged; the schema is
    in the file and in docs/rules-core.md). Calls handled entirely by NPU130 (AMP) are skipped.

    Log messages, paths, docstrings, comments and flag names are never touched. A string in a
    device position that mentions CUDA in any other way (`"cuda,cpu"`, `f"cuda:{a}:{b}"`) is
    reported instead of rewritten.

    ## Example

    ```python
    # before
    d = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.zeros(8, device=f"cuda:{rank}")
    y = x.to("cuda:%d" % i, non_blocking=True)
    state = torch.load("cuda_model.pt", map_location="cuda")
    # after (with NPU120)
    d = torch.device("npu" if torch.npu.is_available() else "cpu")
    x = torch.zeros(8, device=f"npu:{rank}")
    y = x.to("npu:%d" % i, non_blocking=True)
    state = torch.load("cuda_model.pt", map_location="npu")
    ```

    ## Fix safety

    Safe: an exact device string in a proven device position means the same device on the NPU.
    Integer device indexes (`x.to(0)`) are left as they are: torch maps them to the current
    accelerator. Suppress with `# npu-migrate: ignore[NPU103]`.

    ## Options

    Positions are data: add a `codemods/data/device_positions_<name>.json` with the same schema
    (`keywords`, `functions`, `methods`, `names`, `skip_functions`).

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: a `"cuda"` device value becomes `DEVICE.type` (also as the branch of `... if <available> else "cpu"`); `"cuda:1"`, `f"cuda:{i}"`, `"cuda:%d" % i` keep their index with the run's type: `f"{DEVICE.type}:1"` (a string stays a string; on CPU `cpu:1` is the CPU); other CUDA device strings are reported
    """

    code = "NPU103"
    prefilter_in_code = True
    name = "device-string"
    supported_targets = frozenset({"npu", "portable"})
    summary = "`\"cuda\"`/`\"cuda:N\"` device strings in device positions become `\"npu\"`/`\"npu:N\"`"

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._depth = 0  # > 0 inside a function or class body
        self._def_spans: list[tuple[int, int]] | None = None  # lines of the file's functions and classes

    def _module_level(self) -> bool:
        """Whether the statement being looked at is a module-level one. The engine may hand us
        a statement of a function or class body on its own, or of a module-level `if` block:
        the piece's first line tells, by the functions and classes of the file around it."""
        if self._depth:
            return False
        if self._def_spans is None:
            self._def_spans = [(min([s.lineno] + [d.lineno for d in s.decorator_list]), s.end_lineno or s.lineno)
                               for s in self.context.model.of_type(*_SCOPES) if isinstance(s, _SCOPES)]
        line = self.context.line_offset + 1
        return not any(first <= line <= last for first, last in self._def_spans)

    # -- calls: keywords of any call, positions of known functions and methods ---------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not any(mentions_cuda(arg.value) for arg in updated_node.args):
            return updated_node
        if len(original_node.args) != len(updated_node.args):
            return updated_node  # another rule reshaped the call; positions no longer line up
        positions, keywords, where = self._positions_of(original_node)
        if positions is None:
            return updated_node
        args = list(updated_node.args)
        changed = False
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.star:
                if arg.star == "*":
                    index = -1_000_000  # positions after *args are unknown
                continue
            if arg.keyword is None:
                hit = index in positions
                index += 1
            else:
                hit = arg.keyword.value in keywords or arg.keyword.value in self.table.keywords
            if not hit or not mentions_cuda(arg.value):
                continue
            label = f"`{arg.keyword.value}=` of {where}" if arg.keyword else f"device argument of {where}"
            new_value = self.swap(orig.value, arg.value, label)
            if new_value is not arg.value:
                args[i] = arg.with_changes(value=new_value)
                changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    def _positions_of(self, call: cst.Call) -> tuple[frozenset[int] | None, frozenset[str], str]:
        func = call.func
        qualified = self.resolve(func)
        if qualified in self.table.skip_functions:
            return None, frozenset(), ""
        if qualified in self.table.functions:
            positions, keywords = self.table.functions[qualified]
            return positions, keywords, f"`{qualified}()`"
        if isinstance(func, cst.Attribute):
            tail = func.attr.value
            where = f"`{qualified}()`" if qualified else f"`.{tail}()`"
            return self.table.methods.get(tail, frozenset()), frozenset(), where
        name = func.value if isinstance(func, cst.Name) else "a call"
        return frozenset(), frozenset(), f"`{name}()`"

    # -- `... if torch.cuda.is_available() else ...` anywhere -----------------------------------
    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if not (mentions_cuda(updated_node.body) or mentions_cuda(updated_node.orelse)):
            return updated_node
        if self._tests_availability(original_node.test):
            return self.swap(original_node, updated_node, "a branch chosen by `is_available()`")
        if _device_choice(original_node) and _compares_with_cuda(original_node.test):
            # NPU104 rewrites the test (`'cuda' in device`); the value must follow it
            return self.swap(original_node, updated_node, "a device chosen by a device comparison")
        return updated_node

    def _tests_availability(self, test: cst.BaseExpression) -> bool:
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                if self.resolve(node.func) in _AVAILABILITY:
                    return True
            elif isinstance(node, cst.UnaryOperation):
                stack.append(node.expression)
            elif isinstance(node, cst.BooleanOperation):
                stack += [node.left, node.right]
        return False

    # -- names that hold a device: local assignments, parameter defaults, dict values ----------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self._depth -= 1
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self._depth -= 1
        return updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if not mentions_cuda(updated_node.value):
            return updated_node
        keys = [self._device_key(t.target) for t in original_node.targets]
        if all(keys):  # `kwargs["device_type"] = "cuda"`: the entry a dict literal's key would be
            value = self.swap(original_node.value, updated_node.value, f"the `{keys[0]}` entry")
            return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node
        # module-level constants (`DEVICE = "cuda"`) are followed through their uses elsewhere
        if self._module_level():
            return updated_node
        if not all(is_device_name(t.target, self.table.names) for t in original_node.targets):
            return updated_node
        value = self.swap(original_node.value, updated_node.value, "an assignment to a device name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def _device_key(self, target: cst.BaseExpression) -> str | None:
        """The key of `d["device"] = ...` when it is one a dict literal's entry is followed by."""
        if not (isinstance(target, cst.Subscript) and len(target.slice) == 1):
            return None
        index = target.slice[0].slice
        key = index.value if isinstance(index, cst.Index) else None
        if not isinstance(key, cst.SimpleString):
            return None
        name = key.raw_value
        return name if name in self.table.keywords or name.lower() in self.table.names else None

    def leave_AnnAssign(self, original_node: cst.AnnAssign,
                        updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if (updated_node.value is None or original_node.value is None
                or not mentions_cuda(updated_node.value)
                or not is_device_name(original_node.target, self.table.names) or self._module_level()):
            return updated_node
        value = self.swap(original_node.value, updated_node.value, "an assignment to a device name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if (updated_node.default is None or original_node.default is None
                or updated_node.name.value.lower() not in self.table.names
                or not mentions_cuda(updated_node.default)):
            return updated_node
        value = self.swap(original_node.default, updated_node.default, "a device parameter default")
        return updated_node.with_changes(default=value) if value is not updated_node.default else updated_node

    def leave_DictElement(self, original_node: cst.DictElement,
                          updated_node: cst.DictElement) -> cst.DictElement:
        key = updated_node.key
        if not (isinstance(key, cst.SimpleString) and mentions_cuda(updated_node.value)):
            return updated_node
        name = key.raw_value
        if name not in self.table.keywords and name.lower() not in self.table.names:
            return updated_node
        value = self.swap(original_node.value, updated_node.value, f"the `{name}` entry")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.npu.is_available"})


_OTHER_DEVICES = frozenset({"cpu", "mps", "xpu", "meta"})


_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")


def _compares_with_cuda(test: cst.BaseExpression) -> bool:
    """Whether the condition compares something with a `cuda` device string literal."""
    if isinstance(test, cst.BooleanOperation):
        return _compares_with_cuda(test.left) or _compares_with_cuda(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _compares_with_cuda(test.expression)
    if not isinstance(test, cst.Comparison):
        return False
    operands = [test.left] + [c.comparator for c in test.comparisons]
    return any(isinstance(o, cst.SimpleString) and isinstance(o.evaluated_value, str)
               and _CUDA_DEVICE.fullmatch(o.evaluated_value) for o in operands)


def _device_choice(node: cst.IfExp) -> bool:
    """`"cuda" if ... else "cpu"` (either order): a string literal that can only be a device."""
    values = []
    for branch in (node.body, node.orelse):
        if not isinstance(branch, cst.SimpleString) or "b" in branch.prefix.lower():
            return False
        values.append(branch.evaluated_value)
    return any(isinstance(v, str) and _CUDA_DEVICE.fullmatch(v) for v in values) and any(
        v in _OTHER_DEVICES for v in values)


CASES = [
    Invalid(  # mamba_ssm/utils/torch.py: the keyword arguments of torch.amp.custom_fwd, filled in
        """\
        import torch

        def custom_amp_decorator(dec, cuda_amp_deprecated):
            def decorator(*args, **kwargs):
                if cuda_amp_deprecated:
                    kwargs["device_type"] = "cuda"
                return dec(*args, **kwargs)
            return decorator
        """,
        after="""\
        import torch

        def custom_amp_decorator(dec, cuda_amp_deprecated):
            def decorator(*args, **kwargs):
                if cuda_amp_deprecated:
                    kwargs["device_type"] = "npu"
                return dec(*args, **kwargs)
            return decorator
        """,
    ),
    Valid(  # a key that names no device position
        """\
        import torch
        labels = {}
        labels["backend"] = "cuda"
        """,
    ),
    Invalid(
        """\
import torch
d = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.zeros(2, device="cuda")
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
d = torch.device(DEVICE.type if torch.cuda.is_available() else "cpu")
x = torch.zeros(2, device=DEVICE.type)
""",
        codes=("NPU100", "NPU103"),
        options=(("target", "portable"),),
    ),
    Invalid(  # an index is kept, the type is the run's: a string stays a string
        """\
import torch
x = torch.zeros(2, device="cuda:1")
y = x.to(f"cuda:{rank}", non_blocking=True)
z = x.to("cuda:%d" % i)
w = torch.device("cuda", local_rank)
v = x.to("cuda:{}".format(rank))
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
x = torch.zeros(2, device=f"{DEVICE.type}:1")
y = x.to(f"{DEVICE.type}:{rank}", non_blocking=True)
z = x.to(f"{DEVICE.type}:%d" % i)
w = torch.device(DEVICE.type, local_rank)
v = x.to((DEVICE.type + ":{}").format(rank))
""",
        codes=("NPU100", "NPU103"),
        options=(("target", "portable"),),
    ),
    Invalid(  # not a plain device string: reported
        """\
import torch
x = torch.zeros(2, device="cuda:all")
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
d = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.zeros(8, device=f"cuda:{rank}")
y = x.to("cuda:%d" % i, non_blocking=True)
state = torch.load("cuda_model.pt", map_location="cuda")
""",
        after="""\
import os
import torch
d = torch.device("npu" if torch.cuda.is_available() else "cpu")
x = torch.zeros(8, device=f"npu:{rank}")
y = x.to("npu:%d" % i, non_blocking=True)
state = torch.load("cuda_model.pt", map_location="npu")
""",
    ),
    Invalid(  # modded-nanogpt's triton_kernels.py: the device argument of a torch.cuda query
        """\
import torch
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
free, total = torch.cuda.mem_get_info("cuda:1")
torch.cuda.set_rng_state(state, "cuda")
""",
        after="""\
import torch
NUM_SMS = torch.cuda.get_device_properties("npu").multi_processor_count
free, total = torch.cuda.mem_get_info("npu:1")
torch.cuda.set_rng_state(state, "npu")
""",
    ),
    Valid(  # the first argument of set_rng_state is the state, not a device
        """\
import torch
torch.cuda.set_rng_state(saved["cuda"])
torch.cuda.synchronize(device)
""",
    ),
    Valid(
        """\
import os
import torch
d = torch.device("npu" if torch.cuda.is_available() else "cpu")
x = torch.zeros(8, device=f"npu:{rank}")
y = x.to("npu:%d" % i, non_blocking=True)
state = torch.load("cuda_model.pt", map_location="npu")
""",
    ),
    Invalid(
        """\
import torch
d = torch.device("cuda")
""",
        after="""\
import torch
d = torch.device("npu")
""",
    ),
    Invalid(
        """\
import torch
d = torch.device('cuda', 1)
""",
        after="""\
import torch
d = torch.device('npu', 1)
""",
    ),
    Invalid(
        """\
import torch
d = torch.device(type="cuda", index=0)
""",
        after="""\
import torch
d = torch.device(type="npu", index=0)
""",
    ),
    Invalid(
        """\
import torch as th
d = th.device('cuda:0')
""",
        after="""\
import torch as th
d = th.device('npu:0')
""",
    ),
    Invalid(
        """\
from torch import device
d = device('cuda:3')
""",
        after="""\
from torch import device
d = device('npu:3')
""",
    ),
    Invalid(
        """\
import torch
with torch.device('cuda'):
    pass
""",
        after="""\
import torch
with torch.device('npu'):
    pass
""",
    ),
    Invalid(
        """\
import torch
d = torch.device(f"cuda:{rank}")
""",
        after="""\
import torch
d = torch.device(f"npu:{rank}")
""",
    ),
    Invalid(
        """\
import torch
d = torch.device(f"cuda:{rank % 8:d}")
""",
        after="""\
import torch
d = torch.device(f"npu:{rank % 8:d}")
""",
    ),
    Invalid(
        """\
import torch
d = torch.device("cuda:%d" % i)
""",
        after="""\
import torch
d = torch.device("npu:%d" % i)
""",
    ),
    Invalid(
        """\
import torch
d = torch.device("cuda:{}".format(i))
""",
        after="""\
import torch
d = torch.device("npu:{}".format(i))
""",
    ),
    Invalid(
        """\
import torch
d = torch.device("cuda:" + str(i))
""",
        after="""\
import torch
d = torch.device("npu:" + str(i))
""",
    ),
    Invalid(
        """\
import torch
d = torch.device(r'cuda')
""",
        after="""\
import torch
d = torch.device(r'npu')
""",
    ),
    Invalid(
        """\
import torch
x = torch.zeros(3, device="cuda:0")
""",
        after="""\
import torch
x = torch.zeros(3, device="npu:0")
""",
    ),
    Invalid(
        """\
cfg = make(device="cuda", name="cuda")
""",
        after="""\
cfg = make(device="npu", name="cuda")
""",
    ),
    Invalid(
        """\
import torch
m = torch.load("cuda_model.pt", map_location="cuda")
""",
        after="""\
import torch
m = torch.load("cuda_model.pt", map_location="npu")
""",
    ),
    Invalid(
        """\
import torch
m = torch.load(f, 'cuda:0')
""",
        after="""\
import torch
m = torch.load(f, 'npu:0')
""",
    ),
    Invalid(
        """\
import torch
g = torch.Generator(device="cuda")
""",
        after="""\
import torch
g = torch.Generator(device="npu")
""",
    ),
    Invalid(
        """\
r = fork_rng(device_type="cuda")
""",
        after="""\
r = fork_rng(device_type="npu")
""",
    ),
    Invalid(
        """\
y = x.to("cuda")
""",
        after="""\
y = x.to("npu")
""",
    ),
    Invalid(
        """\
y = x.to('cuda:1', non_blocking=True)
""",
        after="""\
y = x.to('npu:1', non_blocking=True)
""",
    ),
    Invalid(
        """\
y = x.to(device="cuda", dtype=d)
""",
        after="""\
y = x.to(device="npu", dtype=d)
""",
    ),
    Invalid(
        """\
y = x.cuda("cuda:1")
""",
        after="""\
y = x.cuda("npu:1")
""",
    ),
    Invalid(
        """\
y = model.to(
    "cuda"  # keep
)
""",
        after="""\
y = model.to(
    "npu"  # keep
)
""",
    ),
    Invalid(
        """\
import torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
""",
        after="""\
import torch
dev = "npu" if torch.cuda.is_available() else "cpu"
""",
    ),
    Invalid(
        """\
import torch
dev = "cpu" if not torch.cuda.is_available() else "cuda:0"
""",
        after="""\
import torch
dev = "cpu" if not torch.cuda.is_available() else "npu:0"
""",
    ),
    Invalid(
        """\
import torch
dev = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
""",
        after="""\
import torch
dev = torch.device("npu" if args.cuda and torch.cuda.is_available() else "cpu")
""",
    ),
    Invalid(
        """\
x = t.to(device="cuda" if use_gpu else "cpu")
""",
        after="""\
x = t.to(device="npu" if use_gpu else "cpu")
""",
    ),
    Invalid(
        """\
def f(model, device="cuda"):
    pass
""",
        after="""\
def f(model, device="npu"):
    pass
""",
    ),
    Invalid(
        """\
def f():
    device = "cuda:1"
""",
        after="""\
def f():
    device = "npu:1"
""",
    ),
    Invalid(
        """\
class C:
    def __init__(self):
        self.device: str = "cuda"
""",
        after="""\
class C:
    def __init__(self):
        self.device: str = "npu"
""",
    ),
    Invalid(
        """\
cfg = {"device": "cuda", "name": "cuda"}
""",
        after="""\
cfg = {"device": "npu", "name": "cuda"}
""",
    ),
    Invalid(
        """\
import torch
p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
""",
        after="""\
import torch
p.add_argument('--device', default='npu' if torch.cuda.is_available() else 'cpu')
""",
    ),
    Valid(
        """\
print("running on cuda")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
logger.info("cuda:0 is busy")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
path = "cuda_model.pt"
m = torch.load("cuda_model.pt")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        '"""Moves the model to cuda."""\n',
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        'def f():\n    """Use "cuda" here."""\n',
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
# device="cuda"
x = 1
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
p.add_argument("--no-cuda", action="store_true", help="disable cuda")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
p.add_argument("--backend", default="cuda")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
DEVICE = "cuda"
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
name = "cuda"
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Invalid(
        """\
x = t.to(b"cuda")
""",
        lines=(1,),
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
y = x.to(0)
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
y = x.to(device)
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
ok = kind == "cuda"
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
if backend.type == "cuda":
    pass
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
x = {"cuda": 1}
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
y = x.to("npu:0")
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
with torch.autocast("cuda"):
    pass
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
dev = "cuda" if use_gpu else "cpu"
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Valid(
        """\
assert x.device.type == "cuda:x"
""",
        with_rules=('NPU104', 'NPU105'),
    ),
    Invalid(
        """\
from transformers import TrainingArguments, AutoModel
m = AutoModel.from_pretrained('x', device_map='cuda:0')
""",
        after="""\
from transformers import TrainingArguments, AutoModel
m = AutoModel.from_pretrained('x', device_map='npu:0')
""",
    ),
    Valid(
        """\
from unittest import mock
mock.patch('os.getcwd')
""",
        with_rules=('NPU120', 'NPU520', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Valid(
        """\
from lightning.pytorch.strategies import DDPStrategy
s = DDPStrategy(process_group_backend='gloo')
""",
        with_rules=('NPU120', 'NPU520', 'NPU521', 'NPU522', 'NPU530'),
    ),
]

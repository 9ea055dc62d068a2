"""NPU500: CUDA device strings built in one place and used as a device in another.

`arg = "cuda:0"` ... `torch.device(arg)`, `dev = "cuda:%d" % i` ... `x.to(dev)`,
`loc = 'cuda:{}'.format(g)` ... `torch.load(p, map_location=loc)`, `def pick(): return "cuda:0"`
... `x.to(pick())`, `def build(name="cuda"): torch.device(name)`, a config field
`accel: str = "cuda"` read as `cfg.accel` in a device position, a module constant another module
imports and uses as a device. The flow is computed once per file with `ast`
(`codemods.analyses.devicevalues`); module constants read by other modules, and the
parameters of other modules' functions called with a CUDA literal by keyword
(`load_state_dict(path, location='cuda')`), come from the project indexes the apply command
computes over every discovered file (see docs/engine.md, docs/device-values.md).

A literal is rewritten (`"cuda"` -> `"npu"`, same forms as NPU103) when **every** use of its
value is a device position (at least one); when some uses are devices and others are not
(written to a path, passed to an unknown function) it is reported with the evidence path.
Literals in NPU103's own positions, and module constants NPU190 decides about, are left to those
rules. Log text, paths and flags are never device values: they do not reach a device position.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

import libcst as cst

from codemods.analyses.selectors import kernel_selectors
from codemods.analyses.devices import device_expr, device_positions, mentions_cuda
from codemods.analyses.devicevalues import (
    DEVICE_CONSTANTS,
    DEVICE_PARAMETERS,
    INDEX_OPTION,
    PARAMETER_INDEX_OPTION,
    FileFlow,
    Finding,
    device_places,
)
from codemods.api.cases import Invalid, Valid
from codemods.api.positions import node_positions
from codemods.api.rule import Fix, Rule
from codemods.families.device_strings import PREFILTER
from codemods.model.cstnodes import code_of
from npu_migrate.core.diagnostics import Severity

_PLAIN = re.compile(r"cuda(:\d+)?")
_VALUE_NODES = (cst.SimpleString, cst.FormattedString, cst.BinaryOperation, cst.Call)


def _root_value(node: cst.BaseExpression) -> str | None:
    """The text of the CUDA literal an expression is built on (what `Finding.value` holds)."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
        return node.parts[0].value
    if isinstance(node, cst.BinaryOperation):
        return _root_value(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _root_value(node.func.value)
    return None


class DeviceValueFlow(Rule):
    """## What it does

    A CUDA device string written in one place and used as a device in another becomes the NPU one.

    ## Why

    NPU103 rewrites strings *in* device positions; `arg = "cuda:0"` ... `torch.device(arg)`, a default
    `def build(name="cuda")`, a config field read as `cfg.accel`, a helper returning `"cuda:0"` or a
    module constant imported by other modules escaped it silently. The flow (`ast`, once per file;
    module constants and the keyword parameters of other modules' functions, such as ControlNet's
    `load_state_dict(path, location='cuda')`, through the project indexes) follows the value through
    locals, `%`, `.format`, f-strings, `+ str(i)`, attributes, dict entries, parameters (positional
    or keyword) and returns. Every use a device: rewritten; some uses devices and some not:
    reported with the evidence path.

    ## Example

    ```python
    # before
    def select_device():
        arg = "cuda:0"
        return torch.device(arg)
    # after
    def select_device():
        arg = "npu:0"
        return torch.device(arg)
    ```

    ## Fix safety

    Safe: a value only ever used as a device names the NPU afterwards; a value also used elsewhere
    is only reported.
    Suppress with `# npu-migrate: ignore[NPU500]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """
    code = "NPU500"
    prefilter_in_code = True
    name = "device-value-flow"
    summary = "CUDA device strings that reach a device position through variables, fields, returns or other modules"
    fix = Fix.SAFE
    severity = Severity.WARNING
    needs_torch_npu = True
    prefilter = PREFILTER  # NPU103's: the same pattern is searched once per file
    project_facts = (DEVICE_CONSTANTS, DEVICE_PARAMETERS)

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._findings: dict[tuple[int, str], Finding] | None = None
        self._here: dict[int, int] = {}  # id(node) -> line in the file, for this chunk

    @property
    def findings(self) -> dict[tuple[int, str], Finding]:
        options = self.context.options
        if self._findings is None and not _may_travel(self.context.source, self.context.facts.tree) \
                and not options.get(INDEX_OPTION) and not options.get(PARAMETER_INDEX_OPTION):
            self._findings = {}  # every CUDA literal sits where NPU103/NPU104 look: no flow needed
        if self._findings is None:
            facts = self.context.facts
            index = options.get(INDEX_OPTION) or {}
            exported = index.get(os.path.abspath(self.context.path), {})
            table = device_positions()
            flow = FileFlow(facts.tree, facts, device_places(), self._cross_module(exported), table.names,
                            options.get(PARAMETER_INDEX_OPTION))
            self._findings = {(f.line, f.value): f for f in flow.findings(skip=self._selector)}
        return self._findings

    def _selector(self, value: ast.expr) -> bool:
        """A kernel selector's `"cuda"` (`impl='cuda'`) names an implementation, not a device
        (NPU192). The file's selectors are looked for only once such a literal is met."""
        return isinstance(value, ast.Constant) and value.value == "cuda" \
            and id(value) in self.context.model.derived(kernel_selectors).literals

    def _cross_module(self, exported: dict[str, Any]) -> dict[str, Any]:
        """Uses by other modules count only for constants NPU190 leaves alone: not read in this
        file and not named like a device (NPU190 rewrites those as settings)."""
        tree_text = self.context.source
        names = device_positions().names
        return {name: uses for name, uses in exported.items()
                if name.lower() not in names and "device" not in name.lower()
                and tree_text.count(name) == 1}

    def visit_Module(self, node: cst.Module) -> None:
        self._here = {}
        if not self.findings:
            return
        wanted = _walk_values(node)
        if not wanted:
            return
        offset = self.context.line_offset
        lines = {line for line, _ in self.findings}
        for key, (line, _) in node_positions(node, wanted).items():
            if line + offset in lines:
                self._here[key] = line + offset

    def _leave_value(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        line = self._here.get(id(original))
        if line is None:
            return updated
        value = _root_value(original) or ""
        if isinstance(original, cst.SimpleString) and not _PLAIN.fullmatch(value):
            return updated  # a template (`"cuda:%d"`): the `%`/`+`/`.format` around it is the value
        finding = self.findings.get((line, value))
        if finding is None or not mentions_cuda(updated):
            return updated  # not a value we follow, or another rule rewrote it already
        new = device_expr(updated) if finding.proven else None
        if new is None:
            self.report(original, f"`{code_of(original)}` is a CUDA device value: it {finding.evidence}; "
                                  "if every use is a device, write \"npu\"")
            return updated
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` (it {finding.evidence})")
        return new

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> Any:
        return self._leave_value(original_node, updated_node)

    def leave_FormattedString(self, original_node: cst.FormattedString,
                              updated_node: cst.FormattedString) -> Any:
        return self._leave_value(original_node, updated_node)

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> Any:
        return self._leave_value(original_node, updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value == "format":
            return self._leave_value(original_node, updated_node)
        return updated_node


# CUDA literals written where NPU103/NPU104 see them directly (`device="cuda"`, `.to("cuda")`,
# `torch.device("cuda")`, `x.type == "cuda"`, `"cuda" in device`, `torch.autocast("cuda")`)
_DIRECT_ANYWHERE = (
    r"""[(,]\s*(?:\w*device\w*|map_location)\s*=\s*f?['"]cuda[^'"]*['"]"""
    r"""|(?:\.to|torch\.device|autocast|GradScaler)\(\s*f?['"]cuda[^'"]*['"]"""
    r"""|[!=]=\s*['"]cuda['"]|['"]cuda['"]\s*(?:[!=]=|in\b)""")
_DIRECT_OUTSIDE = re.compile(_DIRECT_ANYWHERE)
# inside a function or class body, a device-named assignment is NPU103's too; a module-level one
# (`if torch.cuda.is_available(): device = "cuda"`, indented but not in a function) is NPU190's
# or this rule's
_DIRECT_INSIDE = re.compile(r"""^\s+\w*device\w*\s*(?::[^=\n]*)?=\s*f?['"]cuda[^'"]*['"]|""" + _DIRECT_ANYWHERE)
_LITERAL = re.compile(r"""['"]cuda\b""")
_NEWLINE = re.compile(r"\r\n|\r|\n")  # how `ast` counts lines


def _may_travel(source: str, tree: ast.Module) -> bool:
    """Cheap text test: is some CUDA literal written anywhere but a direct device position?
    Only then is the file's flow worth computing."""
    inside: list[tuple[int, int]] = [
        (min([s.lineno] + [d.lineno for d in s.decorator_list]), s.end_lineno or s.lineno)
        for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for number, line in enumerate(_NEWLINE.split(source), 1):
        if "cuda" not in line:
            continue
        direct = _DIRECT_INSIDE if any(a <= number <= b for a, b in inside) else _DIRECT_OUTSIDE
        if _LITERAL.search(direct.sub("", line)):
            return True
    return False


def _walk_values(module: cst.Module) -> list[cst.CSTNode]:
    """The expressions of the chunk that can be a device value (cheap: a string test first)."""
    found: list[cst.CSTNode] = []

    class Collector(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, _VALUE_NODES) and mentions_cuda(node):  # type: ignore[arg-type]
                found.append(node)
            return True

    module.visit(Collector())
    return found


CASES = [
    Invalid(  # a ModelZoo pair: device strings built in a comprehension, used through the list
        """\
import torch
devices = ['cuda:' + str(i) for i in range(4)]
x = torch.zeros(3).to(devices[0])
""",
        after="""\
import torch
devices = ['npu:' + str(i) for i in range(4)]
x = torch.zeros(3).to(devices[0])
""",
    ),
    Invalid(
        """\
import torch
def select_device():
    arg = "cuda:0"
    return torch.device(arg)
""",
        after="""\
import torch
def select_device():
    arg = "npu:0"
    return torch.device(arg)
""",
    ),
    Invalid(
        """\
import torch
def f(x, path):
    d = "cuda:0"
    open(path + d)
    return x.to(d)
""",
        codes=("NPU500",),
    ),
    Invalid(  # a module-level choice in an `if` (indented, yet no function's); a device_map value
        """\
import torch
if torch.cuda.is_available():
    device = "cuda"
else:
    device = "cpu"
def main(model):
    if device == "cuda":
        model = load(device_map={"": device})
    return model.to(device)
""",
        after="""\
import torch
if torch.cuda.is_available():
    device = "npu"
else:
    device = "cpu"
def main(model):
    if device == "cuda":
        model = load(device_map={"": device})
    return model.to(device)
""",
    ),
    Valid(
        """\
import torch
def f():
    msg = "cuda"
    print(msg)
""",
    ),
    # a keyword argument of the file's own function, whose parameter is a device (ControlNet's
    # `load_state_dict(path, location='cuda')` -> `torch.load(..., map_location=torch.device(location))`)
    Invalid(
        """\
import torch
def load_state_dict(path, location="cpu"):
    return torch.load(path, map_location=torch.device(location))
state_dict = load_state_dict("model.pth", location="cuda")
""",
        after="""\
import torch
def load_state_dict(path, location="cpu"):
    return torch.load(path, map_location=torch.device(location))
state_dict = load_state_dict("model.pth", location="npu")
""",
    ),
    # ... and one whose parameter is also a path: reported, not rewritten
    Invalid(
        """\
import os
import torch
def cache(x, where="cpu"):
    os.makedirs(where, exist_ok=True)
    return x.to(where)
y = cache(x, where="cuda")
""",
    ),
    Invalid(
        """\
import torch
def select_device():
    arg = 'cuda:0'
    return torch.device(arg)
""",
        after="""\
import torch
def select_device():
    arg = 'npu:0'
    return torch.device(arg)
""",
    ),
    Invalid(
        """\
import torch
def f(rank, x):
    d = f'cuda:{rank}'
    return x.to(d)
""",
        after="""\
import torch
def f(rank, x):
    d = f'npu:{rank}'
    return x.to(d)
""",
    ),
    Invalid(
        """\
import torch
def f(i):
    d = 'cuda:%d' % i
    return torch.ones(2, device=d)
""",
        after="""\
import torch
def f(i):
    d = 'npu:%d' % i
    return torch.ones(2, device=d)
""",
    ),
    Invalid(
        """\
import torch
def f(i):
    d = 'cuda:' + str(i)
    return torch.ones(2, device=d)
""",
        after="""\
import torch
def f(i):
    d = 'npu:' + str(i)
    return torch.ones(2, device=d)
""",
    ),
    Invalid(
        """\
import torch
def f(args, path):
    loc = 'cuda:{}'.format(args.gpu)
    return torch.load(path, map_location=loc)
""",
        after="""\
import torch
def f(args, path):
    loc = 'npu:{}'.format(args.gpu)
    return torch.load(path, map_location=loc)
""",
    ),
    Invalid(
        """\
import torch
def build(name='cuda'):
    return torch.device(name)
""",
        after="""\
import torch
def build(name='npu'):
    return torch.device(name)
""",
    ),
    Invalid(
        """\
import torch
def pick():
    return 'cuda:0'
def g(x):
    return x.to(pick())
""",
        after="""\
import torch
def pick():
    return 'npu:0'
def g(x):
    return x.to(pick())
""",
    ),
    Invalid(
        """\
import torch
class Cfg:
    accel: str = 'cuda'
def g(cfg, x):
    return x.to(cfg.accel)
""",
        after="""\
import torch
class Cfg:
    accel: str = 'npu'
def g(cfg, x):
    return x.to(cfg.accel)
""",
    ),
    Invalid(
        """\
import torch
class M:
    def __init__(self):
        self.where = 'cuda'
    def run(self, x):
        return x.to(self.where)
""",
        after="""\
import torch
class M:
    def __init__(self):
        self.where = 'npu'
    def run(self, x):
        return x.to(self.where)
""",
    ),
    Invalid(
        """\
import torch
def f(x):
    cfg = {'accel': 'cuda'}
    return x.to(cfg['accel'])
""",
        after="""\
import torch
def f(x):
    cfg = {'accel': 'npu'}
    return x.to(cfg['accel'])
""",
    ),
    Invalid(
        """\
import torch
def f(rank, x):
    base = 'cuda'
    return x.to(f'{base}:{rank}')
""",
        after="""\
import torch
def f(rank, x):
    base = 'npu'
    return x.to(f'{base}:{rank}')
""",
    ),
    Invalid(
        """\
import torch
def f(x):
    d = 'cuda:0'
    print('using', d)
    return x.to(d)
""",
        after="""\
import torch
def f(x):
    d = 'npu:0'
    print('using', d)
    return x.to(d)
""",
    ),
    Valid(
        """\
import torch
def f():
    msg = 'cuda'
    print(msg)
""",
    ),
    Valid(
        """\
import torch
def f():
    name = 'cuda'
    return open(name + '_model.pt')
""",
    ),
    Valid(
        """\
import torch
def f(parser):
    parser.add_argument('--backend', default='cuda', help='cuda')
""",
    ),
    Valid(
        """\
import torch
def f(x):
    return x.to('cuda')
""",
    ),
    Valid(
        """\
import torch
DEVICE = 'cuda'
def f(x):
    return x.to(DEVICE)
""",
    ),
    Valid(
        """\
import torch
def f():
    kind = 'cuda'
    return kind
""",
    ),
]

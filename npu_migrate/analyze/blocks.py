"""Repeated blocks and whether checkpointing them pays.

Gradient checkpointing of a stack of blocks (`nn.ModuleList([Block() for _ in range(n)])`,
`nn.Sequential(*(Bottleneck() for _ in range(n)))`) saves memory only when three things hold,
and each is checked from the code:

1. the blocks have parameters (a stack of `MaxPool2d` or activations stores little and has
   nothing to recompute cheaply: checkpointing it is pointless);
2. the blocks run as a chain, each on the previous one's output (`for b in self.blocks: x = b(x)`
   or calling the `Sequential`); blocks applied each to the same input (`[m(x) for m in self.m]`)
   or one per pyramid level on different inputs (`self.m[i](x[i])`) are not a chain;
3. the stack dominates the class's activation memory: estimated from the literal output widths
   of the layers (`nn.Linear(d, 2048)`, `nn.Conv2d(c, 256, 3)`) times the number of blocks, against
   the rest of the class. Where widths or the depth are not literal the estimate is not made and
   the claim carries medium confidence.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from npu_migrate.analyze.findings import seen

PARAMETER_FREE_CLASSES = frozenset({"activation", "pooling", "dropout", "loss"})
PARAMETER_FREE_NAMES = frozenset({"Identity", "Flatten", "Unflatten", "Upsample", "UpsamplingNearest2d",
                                  "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "Softmax",
                                  "LogSoftmax", "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d",
                                  "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveMaxPool2d",
                                  "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "ChannelShuffle"})
WIDTH_ARGUMENTS = {"matmul/linear": ("out_features", 1), "convolution": ("out_channels", 1),
                   "embedding": ("embedding_dim", 1)}
DOMINANT_SHARE = 0.5


def layer_width(call: ast.Call, entry: dict[str, Any] | None) -> int | None:
    """The literal output width of a layer construction (None when unknown or not a width layer)."""
    if entry is None or entry["class"] not in WIDTH_ARGUMENTS:
        return None
    keyword, position = WIDTH_ARGUMENTS[entry["class"]]
    node = next((k.value for k in call.keywords if k.arg == keyword), None)
    if node is None and len(call.args) > position:
        node = call.args[position]
    if type(node) is ast.Constant and type(node.value) is int:
        return node.value
    return None


def has_parameters(entry: dict[str, Any] | None, short: str) -> bool:
    if short in PARAMETER_FREE_NAMES:
        return False
    return entry is None or entry["class"] not in PARAMETER_FREE_CLASSES


class StackScan:
    """The stacks of repeated blocks in one class, and how its methods use them."""

    def __init__(self, node: ast.ClassDef, qualify: Callable[[ast.AST], str | None], lines: list[str],
                 operators: dict[str, dict[str, Any]]) -> None:
        self.node = node
        self.qualify = qualify
        self.lines = lines
        self.operators = operators

    def stacks(self, containers: list[ast.Call]) -> list[dict[str, Any]]:
        """Stacks among the class's `ModuleList`/`Sequential` calls built from a comprehension."""
        found = []
        for assign in containers:
            name = self.qualify(assign.func) or ""
            container = name.rsplit(".", 1)[-1]
            if not name.startswith("torch.") or container not in ("ModuleList", "Sequential"):
                continue
            comprehension = _comprehension(assign)
            if comprehension is None or type(comprehension.elt) is not ast.Call:
                continue
            element = comprehension.elt
            element_name = self.qualify(element.func)
            short = ast.unparse(element.func).rsplit(".", 1)[-1]
            entry = self.operators.get(element_name or "")
            torch_layer = bool(element_name and element_name.startswith("torch."))
            attr = self._attribute_of(assign)
            use, use_seen = self._use(attr, container)
            found.append({
                "line": assign.lineno, "container": container, "attr": attr, "element": short,
                "torch_layer": torch_layer,
                "parameters": has_parameters(entry, short) if torch_layer else None,  # None: a project class
                "width": layer_width(element, entry) if torch_layer else None,
                "count": _count(comprehension.generators[0].iter),
                "use": use, "use_seen": use_seen,
                "built": seen("blocks built", self.lines, assign.lineno),
            })
        return found

    def _attribute_of(self, call: ast.Call) -> str | None:
        """`self.h = nn.ModuleList(...)` -> h; `h=nn.ModuleList(...)` inside a ModuleDict(dict(...)) -> h."""
        for node in ast.walk(self.node):
            if type(node) is ast.Assign and node.value is call:
                target = node.targets[0]
                return target.attr if type(target) is ast.Attribute else getattr(target, "id", None)
            if type(node) is ast.keyword and node.value is call:
                return node.arg
        return None

    def _use(self, attr: str | None, container: str) -> tuple[str, str | None]:
        """'chained', 'same input', 'per input' or 'unknown', with the line that shows it."""
        if attr is None:
            return "unknown", None
        for method in self.node.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.name == "__init__":
                continue
            for node in ast.walk(method):
                verdict = self._verdict(node, attr, container)
                if verdict is not None:
                    line = node.iter.lineno if isinstance(node, ast.comprehension) else getattr(node, "lineno", 0)
                    return verdict, seen(f"blocks used ({verdict})", self.lines, line)
        return "unknown", None

    def _verdict(self, node: ast.AST, attr: str, container: str) -> str | None:
        if isinstance(node, (ast.For, ast.comprehension)) and _ends_with(node.iter, attr):
            variable = _loop_variable(node.target)
            body = node.body if type(node) is ast.For else []
            for statement in body:
                for child in ast.walk(statement):
                    if type(child) is ast.Assign and type(child.value) is ast.Call \
                            and _calls(child.value, variable):
                        first = child.value.args[0] if child.value.args else None
                        return "chained" if _same_target(child.targets[0], first) else "same input"
            return "same input" if type(node) is ast.comprehension else None
        if type(node) is ast.Call and type(node.func) is ast.Subscript and _ends_with(node.func.value, attr):
            index = ast.unparse(node.func.slice)
            if node.args and type(node.args[0]) is ast.Subscript and ast.unparse(node.args[0].slice) == index:
                return "per input"
        if type(node) is ast.Call and _ends_with(node.func, attr) and container == "Sequential":
            return "chained"
        if type(node) is ast.Call and any(_ends_with(a, attr) for a in node.args) \
                and (self.qualify(node.func) or ast.unparse(node.func)).endswith(("checkpoint_seq", "checkpoint_sequential")):
            return "chained"
        return None


def _comprehension(call: ast.Call) -> ast.ListComp | ast.GeneratorExp | None:
    for arg in call.args:
        if type(arg) is ast.Starred:
            arg = arg.value
        if isinstance(arg, (ast.ListComp, ast.GeneratorExp)):
            return arg
    return None


def _count(node: ast.AST) -> int | str:
    if type(node) is ast.Call and ast.unparse(node.func) == "range" and len(node.args) == 1:
        arg = node.args[0]
        return arg.value if type(arg) is ast.Constant and type(arg.value) is int else ast.unparse(arg)
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts)
    return ast.unparse(node)


def _ends_with(node: ast.AST, attr: str) -> bool:
    if type(node) is ast.Call and ast.unparse(node.func) in ("enumerate", "zip", "reversed") and node.args:
        node = node.args[0]
    return (type(node) is ast.Attribute and node.attr == attr) or (type(node) is ast.Name and node.id == attr)


def _loop_variable(target: ast.AST) -> str | None:
    if type(target) is ast.Tuple and target.elts:
        target = target.elts[-1]
    return target.id if type(target) is ast.Name else None


def _calls(call: ast.Call, variable: str | None) -> bool:
    return variable is not None and type(call.func) is ast.Name and call.func.id == variable


def _same_target(target: ast.AST, argument: ast.AST | None) -> bool:
    if type(target) is ast.Tuple and target.elts:
        target = target.elts[0]
    return argument is not None and ast.unparse(target) == ast.unparse(argument)


# -- across files ---------------------------------------------------------------------------------
class ParameterIndex:
    """Which project module classes carry parameters, and their literal activation widths."""

    def __init__(self, classes: dict[str, Any]) -> None:
        self.classes = classes
        self._parameters: dict[str, bool] = {}

    def parameters(self, name: str, visiting: frozenset[str] = frozenset()) -> bool | None:
        """True/False for a known class, None for a class this project does not define."""
        record = self.classes.get(name)
        if record is None:
            return None
        if name in self._parameters:
            return self._parameters[name]
        found = record.own_parameters or any(p for _, p in record.layer_parameters)
        if not found:
            for sub, _ in record.submodules:
                if sub != name and sub not in visiting and self.parameters(sub, visiting | {name}):
                    found = True
                    break
        self._parameters[name] = found
        return found

    def width(self, name: str, visiting: frozenset[str] = frozenset()) -> int:
        record = self.classes.get(name)
        if record is None or name in visiting:
            return 0
        return sum(record.widths) + sum(self.width(sub, visiting | {name}) for sub, _ in record.submodules)


def checkpoint_verdict(record: Any, stack: dict[str, Any], index: ParameterIndex) -> tuple[bool, list[str], str]:
    """(advise?, evidence, confidence) for one stack of one class."""
    evidence = [stack["built"]]
    parameters = stack["parameters"] if stack["torch_layer"] else index.parameters(stack["element"])
    if parameters is False:
        evidence.append(f"`{stack['element']}` has no parameters")
        return False, evidence, "high"
    evidence.append(f"`{stack['element']}` has parameters" if parameters else
                    f"`{stack['element']}` is not defined in the project (parameters assumed)")
    if stack["use"] != "chained":
        evidence.append(stack["use_seen"] or "no chained use of the blocks found in the class's methods")
        return False, evidence, "high" if stack["use_seen"] else "medium"
    evidence.append(stack["use_seen"])
    count = stack["count"]
    block = stack["width"] if stack["torch_layer"] else index.width(stack["element"])
    rest = sum(record.widths) + sum(index.width(s) for s, _ in record.submodules if s != stack["element"])
    if isinstance(count, int) and count < 2:
        evidence.append(f"only {count} block")
        return False, evidence, "high"
    if not isinstance(count, int) or not block:
        evidence.append(f"depth `{count}` or block widths not literal: activation share not estimated")
        return True, evidence, "medium"
    share = count * block / (count * block + rest)
    evidence.append(f"activation estimate: {count} blocks x width {block} = {count * block} of "
                    f"{count * block + rest} units in `{record.name}` ({share:.0%})")
    return share >= DOMINANT_SHARE, evidence, "high"

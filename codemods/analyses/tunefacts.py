"""Whole-file facts the `tune` rules (NPU600-NPU629) decide on, read from Python's `ast` once per
file through `FileModel.derived(tune_facts)`:

- the training step: the `.backward()` calls and the optimizers built (a `torch.optim` class, or
  a helper named `build_optimizer`/`create_optimizer`...: the step itself may live in another
  module, behind a loss scaler), and whether the file is an entry script (a `__main__` guard or
  module-level code that trains);
- what keeps torch_npu's fused optimizers from standing in for a `torch.optim` one (they combine
  every parameter and gradient into one buffer at their first step): a module's `zero_grad()`,
  `zero_grad(set_to_none=True)`, an assignment to `.grad`, `add_param_group`, a bfloat16 model;
- dynamic shapes: calls whose output size depends on the data, batches padded per batch, sizes
  drawn at random (codemods/data/tune.json `dynamic_shapes`);
- the training loaders: `DataLoader(...)` bound to a name that a loop with a `.backward()` in its
  body iterates, or whose name says it trains.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from codemods.data.tables import load_data
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts
from codemods.model.filemodel import FileModel

DATALOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_OPTIMIZER_NAME = re.compile(r"(?i)optim|^opt$|_opt$|^opt_")
_TRAIN_NAME = re.compile(r"(?i)train")
_NOT_TRAIN_NAME = re.compile(r"(?i)val|test|eval|dev\b|infer|pred")
_LOADER_WRAPPERS = ("enumerate", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm")
_OPTIMIZER_BUILDER = re.compile(r"(?i)^(?:build|create|make|get)_?optimi[sz]er$")


@functools.cache
def tune_data() -> dict[str, Any]:
    data: dict[str, Any] = load_data("tune.json")
    return data


@dataclass
class Blocker:
    line: int
    message: str


@dataclass
class TuneFacts:
    training_lines: list[int] = field(default_factory=list)  # lines of the `.backward()` calls
    optimizer_lines: list[int] = field(default_factory=list)  # lines of the optimizers built
    entry: bool = False  # a script: a __main__ guard, or module-level code that trains
    optimizer_blockers: list[Blocker] = field(default_factory=list)
    dynamic_shapes: list[Blocker] = field(default_factory=list)
    training_loaders: dict[int, str] = field(default_factory=dict)  # line of the call -> why
    compile_mode_set: bool = False

    @property
    def trains(self) -> bool:
        """The file runs a training step or builds the optimizer of one."""
        return bool(self.training_lines or self.optimizer_lines)


def builds_optimizer(name: str | None, last: str) -> bool:
    """A call that builds an optimizer: a `torch.optim` class (`name` is the call's qualified name,
    `last` the callee's last name part), or a helper named like `build_optimizer`."""
    in_torch = name is not None and name.startswith("torch.optim.") and ".lr_scheduler." not in name
    return (in_torch and last[:1].isupper()) or bool(_OPTIMIZER_BUILDER.match(last))


def tune_facts(model: FileModel) -> TuneFacts:
    """The facts of one file (memoized per file by `FileModel.derived(tune_facts)`)."""
    return facts_of(model.tree, model.facts)


def facts_of(tree: ast.Module, facts: FileFacts) -> TuneFacts:
    found = TuneFacts()
    qualify = _qualifier(facts)
    loader_names: dict[str, ast.Call] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            _call(node, qualify, found)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _assignment(node, qualify, found, loader_names)
        elif isinstance(node, ast.If) and _is_main_guard(node.test):
            found.entry = True
    _random_sizes(tree, qualify, found)
    _loader_roles(tree, loader_names, found)
    if any(_module_level_training(stmt) for stmt in tree.body):
        found.entry = True
    return found


def _qualifier(facts: FileFacts) -> Any:
    def qualify(node: ast.AST) -> str | None:
        parts = ast_dotted_parts(node)
        return facts.qualify(parts) if parts else None
    return qualify


def _call(node: ast.Call, qualify: Any, found: TuneFacts) -> None:
    func = node.func
    name = qualify(func)
    data = tune_data()
    blockers = data["optimizer_blockers"]
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            found.training_lines.append(node.lineno)
        elif func.attr == "zero_grad":
            _zero_grad(node, func, blockers, found)
        elif func.attr == "add_param_group":
            found.optimizer_blockers.append(Blocker(node.lineno, blockers["add_param_group"]))
        elif (func.attr == "bfloat16" and not node.args and _is_model_like(func.value)) or (func.attr in ("to", "type") and _names_bfloat16(node, qualify) and _is_model_like(func.value)):
            found.optimizer_blockers.append(Blocker(
                node.lineno, blockers["bfloat16"].format(call=ast.unparse(node))))
        elif func.attr in data["dynamic_shapes"]["methods"] and name is None:
            found.dynamic_shapes.append(Blocker(node.lineno, data["dynamic_shapes"]["methods"][func.attr]))
    last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if builds_optimizer(name, last):
        found.optimizer_lines.append(node.lineno)
    if name in data["dynamic_shapes"]["calls"] and name != "torch.nn.functional.interpolate":
        found.dynamic_shapes.append(Blocker(node.lineno, data["dynamic_shapes"]["calls"][name]))
    if name in ("torch.npu.set_compile_mode", "torch_npu.npu.set_compile_mode"):
        found.compile_mode_set = True


def _zero_grad(node: ast.Call, func: ast.Attribute, blockers: dict[str, str], found: TuneFacts) -> None:
    receiver = ast_dotted_parts(func.value)
    to_none = next((k.value for k in node.keywords if k.arg == "set_to_none"),
                   node.args[0] if node.args else None)
    if receiver and _OPTIMIZER_NAME.search(receiver[-1]):
        if not (isinstance(to_none, ast.Constant) and to_none.value is False) and to_none is not None:
            found.optimizer_blockers.append(Blocker(node.lineno, blockers["zero_grad_set_to_none"]))
        return
    if to_none is None or not (isinstance(to_none, ast.Constant) and to_none.value is False):
        found.optimizer_blockers.append(Blocker(
            node.lineno, blockers["module_zero_grad"].format(call=ast.unparse(node))))


def _names_bfloat16(node: ast.Call, qualify: Any) -> bool:
    values = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
    return any(qualify(v) == "torch.bfloat16" for v in values)


def _is_model_like(node: ast.AST) -> bool:
    """A module rather than a batch: `model`, `self.model`, `net`, `self.encoder`... but not the
    loop's tensors (a heuristic: names of inputs and batches are left out)."""
    parts = ast_dotted_parts(node)
    if not parts:
        return False
    return bool(re.search(r"(?i)model|net|module|encoder|decoder|transformer|^self$", parts[-1])) \
        and not re.search(r"(?i)^(x|y|batch|inputs?|data|target|images?|tokens?)$", parts[-1])


def _assignment(node: ast.Assign | ast.AnnAssign, qualify: Any, found: TuneFacts,
                loader_names: dict[str, ast.Call]) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(target, ast.Attribute) and target.attr == "grad":
            found.optimizer_blockers.append(Blocker(node.lineno, tune_data()["optimizer_blockers"]["grad_assignment"]))
    value = node.value
    if isinstance(value, ast.Call) and qualify(value.func) in DATALOADERS and len(targets) == 1:
        parts = ast_dotted_parts(targets[0])
        if parts:
            loader_names[parts[-1]] = value


def _random_sizes(tree: ast.Module, qualify: Any, found: TuneFacts) -> None:
    """`interpolate(...)` in a function that also draws a random number: a size picked per step
    (multi-scale training)."""
    random_calls = set(tune_data()["dynamic_shapes"]["random_size_calls"])
    reason = tune_data()["dynamic_shapes"]["calls"]["torch.nn.functional.interpolate"]
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = [c for c in ast.walk(function) if isinstance(c, ast.Call)]
        if any(qualify(c.func) in random_calls for c in calls):
            for call in calls:
                if qualify(call.func) == "torch.nn.functional.interpolate":
                    found.dynamic_shapes.append(Blocker(call.lineno, reason + " (a random size)"))


def _loader_roles(tree: ast.Module, loader_names: dict[str, ast.Call], found: TuneFacts) -> None:
    aliases = _wrapped_loaders(tree)  # pbar = tqdm(loader): a loop over pbar iterates loader
    iterated: dict[str, int] = {}
    for loop in ast.walk(tree):
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _has_backward(loop.body):
            name = _iterated_name(loop.iter)
            if name is not None:
                iterated[aliases.get(name, name)] = loop.lineno
    for name, call in loader_names.items():
        if name in iterated:
            found.training_loaders[call.lineno] = (f"training loader: the loop at line {iterated[name]} "
                                                   f"iterates `{name}` and calls `.backward()`")
        elif _TRAIN_NAME.search(name) and not _NOT_TRAIN_NAME.search(name):
            found.training_loaders[call.lineno] = f"training loader by its name `{name}`"


def _wrapped_loaders(tree: ast.Module) -> dict[str, str]:
    """name -> the loader it wraps, for `name = tqdm(loader)` / `enumerate(...)` / `iter(...)`."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call):
            wrapped = _iterated_name(node.value)
            if wrapped is not None and wrapped != node.targets[0].id:
                found[node.targets[0].id] = wrapped
    return found


def _iterated_name(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Call):
        parts = ast_dotted_parts(expr.func)
        if not parts or ".".join(parts) not in _LOADER_WRAPPERS or not expr.args:
            return None
        expr = expr.args[0]
    parts = ast_dotted_parts(expr)
    return parts[-1] if parts else None


def _has_backward(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
               for stmt in body for n in ast.walk(stmt))


def _module_level_training(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.For, ast.While, ast.With, ast.If, ast.Try)) and _has_backward([stmt])


def _is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))

"""DataLoaders as a project builds them, and what each one is for.

A loader is a call of `torch.utils.data.DataLoader`, of a project class deriving from it
(`class InfiniteDataLoader(dataloader.DataLoader)`), of a local name bound to such classes
(`loader = DataLoader if weighted else InfiniteDataLoader`), or of a factory (a function that
returns one). Calls of names that look like loaders (`create_dataloader(...)`) are kept as
candidates and resolved across files once every file's classes and factories are known.

The role (training or evaluation) decides advice such as `drop_last=True`, which must never be
given for a validation or test loader (it would drop samples from the evaluation). It is read
from use first (a `for` over the loader that calls `.backward()` trains; one under
`torch.no_grad()`/`inference_mode()` or after `model.eval()` evaluates), then from names (the
variable, the dataset, `train=False`, a `'val: '` prefix), then from `shuffle=True` (training,
medium confidence). A loader with no such sign has an unknown role and gets no role-dependent
advice.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from npu_migrate.analyze.findings import seen

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
SAMPLER_MODULES = ("torch.utils.data.", "torch.utils.data.sampler.", "torch.utils.data.distributed.")
EVAL_WORD = re.compile(r"(?:^|[^a-z])(val|valid|validation|eval|evaluation|test|testing)(?=[^a-z]|$|loader|set|data|dl|ds|iter)")
TRAIN_WORD = re.compile(r"(?:^|[^a-z])(train|training)(?=[^a-z]|$|loader|set|data|dl|ds|iter)")
LOADERISH = re.compile(r"loader", re.IGNORECASE)
NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad"})
TRAIN_KEYWORDS = frozenset({"train", "is_train", "training", "is_training"})


def literal(node: ast.AST | None) -> Any:
    """A literal's value, or the expression's source for anything else."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    return ast.unparse(node)


def word_role(text: str) -> str | None:
    lowered = text.lower()
    if EVAL_WORD.search(lowered):
        return "eval"
    if TRAIN_WORD.search(lowered):
        return "train"
    return None


class LoaderScan:
    def __init__(self, tree: ast.Module, qualify: Callable[[ast.AST], str | None], lines: list[str],
                 settings_order: list[str]) -> None:
        self.tree = tree
        self.qualify = qualify
        self.lines = lines
        self.positional = settings_order
        self.parents: dict[int, ast.AST] = {}
        self.classes: set[str] = set()
        self.samplers: set[str] = set()
        self.aliases: set[str] = set()

    def _parents(self) -> dict[int, ast.AST]:
        """Child -> parent, built on first need (most files build no loader)."""
        if not self.parents:
            for node in ast.walk(self.tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[id(child)] = node
        return self.parents

    def run(self) -> dict[str, Any]:
        nodes: dict[type, list[Any]] = {ast.ClassDef: [], ast.Assign: [], ast.Call: [], ast.FunctionDef: [],
                                        ast.AsyncFunctionDef: []}
        for node in ast.walk(self.tree):  # one walk; each step below reads only its kind of node
            found = nodes.get(type(node))
            if found is not None:
                found.append(node)
        self._classes(nodes[ast.ClassDef])
        self._aliases(nodes[ast.Assign])
        loaders, candidates, samplers = [], [], []
        constructions: set[int] = set()
        for node in nodes[ast.Call]:
            kind = self._kind(node)
            if kind is None:
                continue
            if kind == "sampler":
                samplers.append({"line": node.lineno, "what": ast.unparse(node.func)})
                continue
            record = self._record(node, kind)
            if kind == "candidate":
                candidates.append(record)
            else:
                constructions.add(id(node))
                loaders.append(record)
        factories = self._factories(nodes[ast.FunctionDef] + nodes[ast.AsyncFunctionDef], constructions)
        return {"loaders": loaders, "candidates": candidates, "classes": sorted(self.classes),
                "sampler_classes": sorted(self.samplers), "samplers": samplers, "factories": factories}

    # -- what is a loader ------------------------------------------------------------------------
    def _is_loader_class(self, node: ast.AST) -> bool:
        name = self.qualify(node)
        if name in DATALOADER:
            return True
        return type(node) is ast.Name and node.id in self.classes

    def _classes(self, nodes: list[ast.ClassDef]) -> None:
        changed = True
        while changed:
            changed = False
            for node in nodes:
                if node.name in self.classes or node.name in self.samplers:
                    continue
                if any(self._is_loader_class(b) for b in node.bases):
                    self.classes.add(node.name)
                    changed = True
                elif any(_is_sampler_name(self.qualify(b)) or (type(b) is ast.Name and b.id in self.samplers)
                         for b in node.bases):
                    self.samplers.add(node.name)
                    changed = True

    def _aliases(self, assignments: list[ast.Assign]) -> None:
        for node in assignments:
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name \
                    and type(node.value) in (ast.IfExp, ast.Name, ast.Attribute):
                names = [n for n in ast.walk(node.value) if isinstance(n, (ast.Name, ast.Attribute))]
                if any(self._is_loader_class(n) for n in names):
                    self.aliases.add(node.targets[0].id)

    def _kind(self, node: ast.Call) -> str | None:
        func = node.func
        name = self.qualify(func)
        if name in DATALOADER:
            return "DataLoader"
        if _is_sampler_name(name) or (type(func) is ast.Name and func.id in self.samplers):
            return "sampler"
        short = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        if type(func) is ast.Name and short in self.classes:
            return f"subclass {short}"
        if type(func) is ast.Name and short in self.aliases:
            return f"alias {short}"
        if short and LOADERISH.search(short) and not (name or "").startswith("torch."):
            return "candidate"
        return None

    def _record(self, node: ast.Call, kind: str) -> dict[str, Any]:
        settings: dict[str, Any] = {}
        for name, arg in zip(self.positional, node.args):
            if type(arg) is not ast.Starred:
                settings[name] = literal(arg)
        for keyword in node.keywords:
            if keyword.arg:
                settings[keyword.arg] = literal(keyword.value)
        func = node.func
        callee = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        role, evidence = self._role(node, settings.get("shuffle"))
        return {"line": node.lineno, "col": node.col_offset + 1, "kind": kind, "callee": callee,
                "qualified": self.qualify(func),
                "settings": settings, "unpacked": any(k.arg is None for k in node.keywords),
                "function": self._function_name(node), "role": role, "role_evidence": evidence,
                "construction": seen("loader built", self.lines, node.lineno)}

    # -- roles -----------------------------------------------------------------------------------
    def _role(self, node: ast.Call, shuffle: Any) -> tuple[str | None, list[str]]:
        target = self._target(node)
        function = self._enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if target and function is not None:
            use = self._use_role(function, target)
            if use:
                return use
        if target and word_role(target):  # the name a person gave the loader speaks first
            role = word_role(target)
            return role, [f"role {role} by name: assigned to `{target}` (line {node.lineno})"]
        named: list[tuple[str, str]] = []
        for child in ast.walk(node):
            if child is node or child is node.func:
                continue
            if type(child) is ast.keyword and child.arg in TRAIN_KEYWORDS and type(child.value) is ast.Constant:
                named.append(("train" if child.value.value else "eval", f"`{child.arg}={child.value.value!r}`"))
            elif type(child) is ast.Name and word_role(child.id):
                named.append((word_role(child.id), f"argument `{child.id}`"))  # type: ignore[arg-type]
            elif type(child) is ast.Attribute and word_role(child.attr):
                named.append((word_role(child.attr), f"argument `{ast.unparse(child)}`"))  # type: ignore[arg-type]
            elif type(child) is ast.Constant and isinstance(child.value, str) and len(child.value) < 40 \
                    and word_role(child.value):
                named.append((word_role(child.value), f"string {child.value!r}"))  # type: ignore[arg-type]
        roles = {role for role, _ in named}
        if len(roles) == 1:
            role = roles.pop()
            return role, [f"role {role} by name: " + ", ".join(dict.fromkeys(why for _, why in named))
                          + f" (line {node.lineno})"]
        if roles:
            return None, ["role unknown: names point both ways: " + ", ".join(why for _, why in named)]
        if shuffle is True:
            return "train", [f"role train from `shuffle=True` (line {node.lineno}), medium confidence"]
        return None, []

    def _target(self, node: ast.AST) -> str | None:
        current: ast.AST = node
        parent: ast.AST | None = self._parents().get(id(node))
        while isinstance(parent, (ast.Subscript, ast.Tuple)) and current is not getattr(parent, "slice", None):
            current, parent = parent, self._parents().get(id(parent))
        if type(parent) is not ast.Assign:
            return None
        target = parent.targets[0]
        if type(target) is ast.Tuple and target.elts:
            target = target.elts[0]
        if type(target) is ast.Name:
            return target.id
        if type(target) is ast.Attribute:
            return target.attr
        if type(target) is ast.Subscript and type(target.slice) is ast.Constant:
            return str(target.slice.value)
        return None

    def _use_role(self, function: ast.AST, name: str) -> tuple[str, list[str]] | None:
        for loop in ast.walk(function):
            if type(loop) is not ast.For or not _iterates(loop.iter, name):
                continue
            where = seen(f"`{name}` consumed", self.lines, loop.lineno)
            if any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "backward"
                   for n in ast.walk(loop)):
                return "train", [f"role train by use: {where} calls `.backward()`"]
            if self._under_no_grad(loop, function) or _calls_eval_before(function, loop):
                return "eval", [f"role eval by use: {where} runs under no_grad / after `.eval()`"]
        return None

    def _under_no_grad(self, node: ast.AST, function: ast.AST) -> bool:
        for decorator in getattr(function, "decorator_list", []):
            target = decorator.func if type(decorator) is ast.Call else decorator
            if self.qualify(target) in NO_GRAD:
                return True
        current = self._parents().get(id(node))
        while current is not None and current is not function:
            if type(current) is ast.With and any(
                    type(item.context_expr) is ast.Call and self.qualify(item.context_expr.func) in NO_GRAD
                    for item in current.items):
                return True
            current = self._parents().get(id(current))
        return False

    def _enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        current = self._parents().get(id(node))
        while current is not None and not isinstance(current, kinds):
            current = self._parents().get(id(current))
        return current

    def _function_name(self, node: ast.AST) -> str | None:
        function = self._enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        return function.name if function is not None else None  # type: ignore[attr-defined]

    def _factories(self, functions: list[ast.FunctionDef | ast.AsyncFunctionDef], constructions: set[int]) -> list[str]:
        """Functions that return a loader they build (directly, or through a name bound to one)."""
        found: list[str] = []
        if not constructions:
            return found
        for function in functions:
            built = {t.id for n in ast.walk(function) if type(n) is ast.Assign and id(n.value) in constructions
                     for t in n.targets if type(t) is ast.Name}
            for node in ast.walk(function):
                if type(node) is ast.Return and node.value is not None and any(
                        id(n) in constructions or (type(n) is ast.Name and n.id in built)
                        for n in ast.walk(node.value)):
                    found.append(function.name)
                    break
        return found


def _is_sampler_name(name: str | None) -> bool:
    return bool(name) and name.startswith(SAMPLER_MODULES) and name.endswith("Sampler")  # type: ignore[union-attr]


def _iterates(node: ast.AST, name: str) -> bool:
    """`for b in loader`, `for i, b in enumerate(loader)`, `tqdm(loader)`, `self.loader`."""
    while type(node) is ast.Call and node.args:
        node = node.args[0]
    if type(node) is ast.Name:
        return node.id == name
    return type(node) is ast.Attribute and node.attr == name


def _calls_eval_before(function: ast.AST, loop: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and type(n.func) is ast.Attribute and n.func.attr == "eval" and not n.args
               and n.lineno <= getattr(loop, "lineno", 0) for n in ast.walk(function))


def combine_roles(roles: list[str | None]) -> str | None:
    """The role of a loader built in a factory, from the roles of the factory's callers."""
    known = {r for r in roles if r}
    if len(known) > 1:
        return "train and eval"
    if not known or (None in roles and known == {"train"}):  # an unknown caller may evaluate
        return None
    return known.pop()


# -- across files ---------------------------------------------------------------------------------
COLUMNS = ["batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "drop_last"]


def resolve(loaders: list[tuple[str, dict[str, Any]]], candidates: list[tuple[str, dict[str, Any]]],
            classes: set[str], factories: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
    """Every loader construction of the project with its role: calls of project DataLoader
    subclasses found in other files join the constructions; a construction inside a factory
    takes the roles of the factory's callers."""
    found = list(loaders)
    callers: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path, call in candidates:
        if call["callee"] in classes:
            found.append((path, dict(call, kind=f"subclass {call['callee']}")))
        elif call["callee"] in factories:
            for defined_in in _defining_files(call, factories[call["callee"]]):
                callers.setdefault(f"{defined_in}::{call['callee']}", []).append((path, call))
    resolved = []
    for path, loader in found:
        factory = loader["function"]
        calls = callers.get(f"{path}::{factory}")
        if calls:
            role = combine_roles([c["role"] for _, c in calls])
            evidence = [f"built by factory `{factory}`, called at " + ", ".join(
                f"{p}:{c['line']} ({c['role'] or 'role unknown'})" for p, c in calls)]
            evidence += [e for _, c in calls for e in c["role_evidence"]]
            loader = dict(loader, role=role, role_evidence=evidence)
        resolved.append((path, loader))
    return sorted(resolved, key=lambda item: (item[0], item[1]["line"]))


def is_test_file(path: str) -> bool:
    """Test code builds loaders to exercise features, not to train: no tuning advice there."""
    parts = path.replace("\\", "/").split("/")
    return any(p in ("tests", "test") for p in parts[:-1]) or parts[-1].startswith("test_")


def _defining_files(call: dict[str, Any], files: list[str]) -> list[str]:
    """The files a factory call may reach: the one its import names (`from utils.segment.dataloaders
    import create_dataloader`) when several files define a factory of that name."""
    if len(files) == 1 or not call.get("qualified") or "." not in call["qualified"]:
        return files
    module = call["qualified"].rsplit(".", 1)[0].replace(".", "/")
    named = [f for f in files if f.replace("\\", "/").endswith(module + ".py")
             or f.replace("\\", "/").endswith(module + "/__init__.py")]
    return named or files


def advice(settings: dict[str, Any], spec: dict[str, Any], role: str | None, kind: str = "DataLoader") -> list[str]:
    """Recommendations for one loader. `drop_last` depends on the role: only a training loader
    may drop its last batch; evaluation must see every sample. A project subclass manages its
    own workers (yolov5's InfiniteDataLoader re-uses them), so `persistent_workers` is not advised."""
    found = []
    workers = settings.get("num_workers", 0)
    has_workers = not (isinstance(workers, int) and workers == 0)
    batches_given = bool(settings.get("batch_sampler"))  # it decides batch size and the last batch
    for name, rule in spec.items():
        if rule.get("needs_workers") and not has_workers:
            continue
        if batches_given and name in ("batch_size", "drop_last"):
            continue
        if kind != "DataLoader" and name == "persistent_workers":
            continue
        if rule.get("training_only") and role != "train":
            if role == "train and eval" and settings.get(name, rule["default"]) in rule["bad"]:
                found.append(rule["advice_shared"])
            continue
        if name not in settings:
            if "advice_missing" in rule and (rule.get("bad") is None or rule["default"] in rule["bad"]
                                             or name == "batch_size"):
                found.append(rule["advice_missing"])
        elif settings[name] in rule.get("bad", []) and type(settings[name]) is type(rule["bad"][0]):
            found.append(rule["advice_bad"])
    return found

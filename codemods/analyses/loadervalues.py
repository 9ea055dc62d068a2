"""Which names hold a `DataLoader` that pins memory: in one file, and across the project.

The insertion rule NPU410 adds `non_blocking=True` to the batch copies of loops over a loader
that pins memory. A loader travels like a device value (`codemods/analyses/devicevalues.py`):
through names, attributes, parameters every visible call fills with one, and the returns of
helper functions. `pinned_loaders` answers for one file (Python's `ast`, computed once), and
`project_loader_index` adds the helpers *other modules* define (`from data import build_loader`,
`import data as d; d.build_loader(...)`, relative imports too): computed before `--shard` /
`--changed-since` narrow the set, like the device index, and carried to the workers in the
rule options (`LOADER_INDEX_OPTION`).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from codemods.analyses.devicevalues import module_names, parse_source, read_source
from codemods.data.tables import load_data
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts

LOADER_INDEX_OPTION = "loader_index"  # RuleContext.options key: {abspath: [call spellings]}
Qualify = Callable[[list[str]], "str | None"]


def _insertion_data() -> dict[str, Any]:
    return load_data("insertion.json")


@dataclass(frozen=True)
class PinnedLoaders:
    """`names`: names/attributes bound only to pinning loaders; `helpers`: how a call of a
    function returning one is spelled here (`make_loader`, `self.train_dataloader` by its last
    part, `data.build_loader` when imported from another module)."""

    names: frozenset[str]
    helpers: frozenset[str]
    imported: frozenset[str]

    def returned_by(self, func: ast.expr) -> bool:
        parts = ast_dotted_parts(func)
        if parts and ".".join(parts) in self.imported:
            return True
        key = _key(func)
        return key is not None and key in self.helpers


def _key(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def will_pin(call: ast.Call) -> bool:
    """Pins after NPU410 ran: `pin_memory=True`, or no pin_memory at all (the rule adds it)."""
    for kw in call.keywords:
        if kw.arg == "pin_memory":
            return isinstance(kw.value, ast.Constant) and kw.value.value is True
        if kw.arg is None:
            return False
    position = _insertion_data()["dataloader_pin_memory_position"]
    if len(call.args) > position:
        arg = call.args[position]
        return isinstance(arg, ast.Constant) and arg.value is True
    return True


def pinned_loaders(tree: ast.Module, qualify: Qualify, imported: Collection[str] = ()) -> PinnedLoaders:
    """The names of `tree` that hold pinning loaders and the helpers that return them.
    `imported`: call spellings of helpers other modules define (from the project index)."""
    loaders = set(_insertion_data()["dataloaders"])
    imported = frozenset(imported)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
    bindings: dict[str, list[ast.AST | None]] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node if node.name not in functions else None
        elif isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                key = _key(target)
                if key:
                    bindings.setdefault(key, []).append(node.value)
                else:
                    for inner in ast.walk(target):
                        if isinstance(inner, ast.Name):
                            bindings.setdefault(inner.id, []).append(None)
        elif isinstance(node, (ast.For, ast.comprehension, ast.withitem)):
            bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
            for inner in ast.walk(bound) if bound is not None else ():
                if isinstance(inner, ast.Name):
                    bindings.setdefault(inner.id, []).append(None)
    for call in calls:  # parameters take the values visible calls pass in
        key = _key(call.func)
        func = functions.get(key) if key else None
        if func is None:
            continue
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if isinstance(call.func, ast.Attribute) and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        for param, value in zip(params, call.args):
            bindings.setdefault(param, []).append(None if isinstance(value, ast.Starred) else value)
        for kw in call.keywords:
            if kw.arg:
                bindings.setdefault(kw.arg, []).append(kw.value)

    # greatest fixpoint: a name stays pinned while every value bound to it pins (names passed on
    # to themselves, `train(loader)` into `def train(loader)`, are consistent)
    pinned = {key for key, values in bindings.items() if values}
    helpers = {name for name, func in functions.items() if func is not None}

    def pins(value: ast.AST | None) -> bool:
        if isinstance(value, ast.Call):
            parts = ast_dotted_parts(value.func)
            if parts and qualify(parts) in loaders:
                return will_pin(value)
            if parts and ".".join(parts) in imported:
                return True
            return _key(value.func) in helpers
        return value is not None and _key(value) in pinned

    while True:
        new_helpers = {name for name in helpers if _returns_pinned(functions[name], pins)}
        new_pinned = {key for key in pinned if all(pins(v) for v in bindings[key])}
        if new_helpers == helpers and new_pinned == pinned:
            break
        helpers, pinned = new_helpers, new_pinned
    # ... and is grounded: some chain of bindings or returns starts at a DataLoader(...) call (a
    # name bound only to itself, `make(ds)` into `def make(ds)`, holds no loader)
    grounded: set[str] = set()
    grounded_helpers: set[str] = set()

    def starts(value: ast.AST | None) -> bool:
        if isinstance(value, ast.Call):
            parts = ast_dotted_parts(value.func)
            if parts and qualify(parts) in loaders:
                return will_pin(value)
            return (parts is not None and ".".join(parts) in imported) or _key(value.func) in grounded_helpers
        return _key(value) in grounded

    changed = True
    while changed:
        changed = False
        for key in pinned - grounded:
            if any(starts(v) for v in bindings[key]):
                grounded.add(key)
                changed = True
        for name in helpers - grounded_helpers:
            if _returns_pinned(functions[name], starts):
                grounded_helpers.add(name)
                changed = True
    helpers = grounded_helpers
    return PinnedLoaders(frozenset(grounded), frozenset(helpers), imported)


def _returns_pinned(func: ast.FunctionDef | ast.AsyncFunctionDef | None, pins: Callable[[ast.AST | None], bool]) -> bool:
    if func is None:
        return False
    returns = [n.value for n in ast.walk(func) if isinstance(n, ast.Return)]
    return bool(returns) and all(pins(v) for v in returns)


# -- the project index: loader helpers other modules define -----------------------------------

_LOADER_TEXT = re.compile(rb"DataLoader")


def project_loader_index(paths: Iterable[str], root: str) -> dict[str, list[str]]:
    """`{abspath of a file: [call spellings of helpers it imports that return a pinning loader]}`.

    Two cheap passes: files that mention `DataLoader` are parsed for module-level functions whose
    every `return` is a pinning loader; then files that mention one of those names are parsed
    for how they import it."""
    python = [p for p in paths if p.endswith(".py")]
    exported: dict[str, str] = {}  # "module.function" -> abspath of its file
    for path in python:
        data = read_source(path)
        if data is None or not _LOADER_TEXT.search(data) or b"return" not in data:
            continue
        tree = parse_source(data)
        if tree is None:
            continue
        found = pinned_loaders(tree, FileFacts.from_tree(tree).qualify)
        top = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for name in found.helpers & top:
            for module in module_names(path, root):
                exported[f"{module}.{name}"] = os.path.abspath(path)
    if not exported:
        return {}
    names = sorted({key.rsplit(".", 1)[1] for key in exported})
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b")
    index: dict[str, list[str]] = {}
    for path in python:
        data = read_source(path)
        if data is None or not pattern.search(data) or b"import" not in data:
            continue
        tree = parse_source(data)
        if tree is None:
            continue
        spellings = _imported_helpers(tree, path, root, exported)
        if spellings:
            index[os.path.abspath(path)] = sorted(spellings)
    return index


def _imported_helpers(tree: ast.Module, path: str, root: str, exported: dict[str, str]) -> set[str]:
    """How `tree` spells calls of the exported helpers it imports (any scope)."""
    here = module_names(path, root)
    package = here[0].split(".") if here else []
    if package and os.path.basename(path) != "__init__.py":
        package = package[:-1]
    own = os.path.abspath(path)
    spellings: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                target = exported.get(f"{module}.{alias.name}")
                if target is not None and target != own:
                    spellings.add(alias.asname or alias.name)
                elif alias.name != "*":  # `from pkg import data` then `data.build_loader()`
                    prefix = f"{module}.{alias.name}." if module else f"{alias.name}."
                    spellings |= {(alias.asname or alias.name) + "." + key[len(prefix):]
                                  for key, file in exported.items() if key.startswith(prefix) and file != own
                                  and "." not in key[len(prefix):]}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                prefix = alias.name + "."
                local = alias.asname or alias.name
                spellings |= {local + "." + key[len(prefix):] for key, file in exported.items()
                              if key.startswith(prefix) and file != own and "." not in key[len(prefix):]}
    return spellings

"""Which names hold a `DataLoader` that pins memory: in one file, and across the project.

The insertion rule NPU410 adds `non_blocking=True` to the batch copies of loops over a loader
that pins memory. A loader travels like a device value (`codemods/analyses/devicevalues.py`):
through names, attributes, parameters every visible call fills with one, and the returns of
helper functions. `pinned_loaders` answers for one file (Python's `ast`, computed once), and
the project fact `PINNED_LOADER_HELPERS` adds the helpers *other modules* of the package root
define (`from data import build_loader`, `import data as d; d.build_loader(...)`, relative
imports too): merged over the whole root whatever `--shard` / `--changed-since` keep, like the
device index, and carried to the workers in the rule options (`LOADER_INDEX_OPTION`).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from codemods.api.facts import Project, ProjectFact, SourceFile, local_project
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


# -- the project fact: loader helpers other modules define ------------------------------------

_LOADER_TEXT = re.compile(rb"DataLoader")


class PinnedLoaderHelpers(ProjectFact):
    """NPU410's index of a package root: `{abspath of a file: [call spellings of helpers it
    imports that return a pinning loader]}`.

    A file's summary is its module-level functions whose every `return` is a pinning loader (only
    files that mention `DataLoader` are parsed); the merge then asks the files that mention one
    of those names how they import them (`helper_imports`)."""

    key = LOADER_INDEX_OPTION

    def summarize(self, source: SourceFile) -> list[str] | None:
        if not _LOADER_TEXT.search(source.data) or b"return" not in source.data or source.tree is None:
            return None
        tree = source.tree
        found = pinned_loaders(tree, FileFacts.from_tree(tree).qualify)
        top = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return sorted(found.helpers & top) or None

    def merge(self, project: Project) -> dict[str, list[str]]:
        exported: dict[str, str] = {}  # "module.function" -> abspath of its file
        for path, helpers in project.summaries(self):
            for name in helpers:
                for module in project.module_names(path):
                    exported[f"{module}.{name}"] = path
        if not exported:
            return {}
        names = sorted({key.rsplit(".", 1)[1] for key in exported})
        index: dict[str, list[str]] = {}
        for path in project.files():
            imports = project.analyse(path, helper_imports, names)
            spellings = _imported_helpers(imports, path, project, exported) if imports else set()
            if spellings:
                index[path] = sorted(spellings)
        return index

    def slice(self, index: Any, path: str) -> Any:
        return index.get(os.path.abspath(path))


PINNED_LOADER_HELPERS = PinnedLoaderHelpers()


def project_loader_index(paths: Iterable[str], root: str) -> dict[str, list[str]]:
    """`PINNED_LOADER_HELPERS` of the files `paths` as one package root at `root`, nothing cached."""
    return PINNED_LOADER_HELPERS.merge(local_project([PINNED_LOADER_HELPERS], paths, root))


def helper_imports(source: SourceFile, names: Sequence[str]) -> list[list[Any]] | None:
    """The imports (any scope, in walk order) of a file that mentions one of `names` and imports
    something: `["from", level, module, [[name, asname], ...]]` or `["import", [[name, asname], ...]]`."""
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b")
    if not pattern.search(source.data) or b"import" not in source.data or source.tree is None:
        return None
    found: list[list[Any]] = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom):
            found.append(["from", node.level, node.module, [[a.name, a.asname] for a in node.names]])
        elif isinstance(node, ast.Import):
            found.append(["import", [[a.name, a.asname] for a in node.names]])
    return found


def _imported_helpers(imports: list[list[Any]], path: str, project: Project, exported: dict[str, str]) -> set[str]:
    """How a file spells calls of the exported helpers it imports (any scope)."""
    here = project.module_names(path)
    package = here[0].split(".") if here else []
    if package and os.path.basename(path) != "__init__.py":
        package = package[:-1]
    spellings: set[str] = set()
    for record in imports:
        if record[0] == "from":
            _, level, module, aliases = record
            if level:
                if level - 1 > len(package):
                    continue
                base = package[:len(package) - (level - 1)]
                module = ".".join(base + ([module] if module else []))
            else:
                module = module or ""
            for name, asname in aliases:
                target = exported.get(f"{module}.{name}")
                if target is not None and target != path:
                    spellings.add(asname or name)
                elif name != "*":  # `from pkg import data` then `data.build_loader()`
                    prefix = f"{module}.{name}." if module else f"{name}."
                    spellings |= {(asname or name) + "." + key[len(prefix):]
                                  for key, file in exported.items() if key.startswith(prefix) and file != path
                                  and "." not in key[len(prefix):]}
        else:
            for name, asname in record[1]:
                prefix = name + "."
                local = asname or name
                spellings |= {local + "." + key[len(prefix):] for key, file in exported.items()
                              if key.startswith(prefix) and file != path and "." not in key[len(prefix):]}
    return spellings

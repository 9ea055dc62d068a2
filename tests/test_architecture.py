"""The layers of docs/architecture.md, enforced on the source.

Every module of `npu_migrate` and `codemods` is parsed with `ast`; every import counts, at any
depth (a function-level "lazy" import is still a dependency) and `importlib.import_module` with a
literal name too. From them come the module graph and the unit graph (a unit is a layer's package,
or a top-level module of its own such as `npu_migrate/cli.py`). The tests fail, naming the files
and lines, on a cycle, an import against the layer order, a rule importing another rule, and any
use of a private module or name across a layer boundary (LibCST's included).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_PACKAGES = ("npu_migrate", "codemods")
RULES_UNIT = "codemods.rules"

# Each unit stands on the units it lists and, through them, on everything below those.
# Keep this table and the picture in docs/architecture.md the same.
STANDS_ON: dict[str, tuple[str, ...]] = {
    "npu_migrate": (),  # the top-level __init__ files are leaves: they import nothing of ours
    "codemods": (),
    "npu_migrate.core": (),
    "codemods.data": ("npu_migrate.core",),
    "codemods.model": ("npu_migrate.core",),
    "codemods.api": ("codemods.data", "codemods.model"),
    "codemods.analyses": ("codemods.api",),
    "codemods.families": ("codemods.analyses",),
    "codemods.rules": ("codemods.families",),
    "codemods.docgen": ("codemods.api",),
    "npu_migrate.apply": ("codemods.rules",),
    "npu_migrate.analyze": ("npu_migrate.apply",),
    "npu_migrate.emulation": ("npu_migrate.core",),
    "npu_migrate.verify": ("npu_migrate.emulation",),
    "npu_migrate.memory": ("npu_migrate.core",),
    "npu_migrate.commands": ("npu_migrate.analyze", "npu_migrate.verify", "npu_migrate.memory", "codemods.docgen"),
    "npu_migrate.cli": ("npu_migrate.commands",),
    "npu_migrate.__main__": ("npu_migrate.cli",),
}
LEAVES = ("npu_migrate", "codemods")  # anything may import these (they import nothing of ours)

# Violations in areas that other work on issue 12 and its neighbours is changing right now, each
# with who fixes it. A test fails on any violation not listed here and on a listed one that has
# gone, so this list only shrinks; it is to be empty once that work has merged.
PENDING: dict[str, str] = {
    "cycle npu_migrate.verify.analysis <-> npu_migrate.verify.core":
        "issue 17 (verify): analysis names core.VerifyOptions (for typing only)",
    "private npu_migrate.verify.runner -> npu_migrate.emulation._devices":
        "issue 17 (verify): the emulation should export DeviceMapMode",
}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (one of ours, resolved to a module that exists)
    names: tuple[str, ...]  # `from target import names`; empty for `import target`
    line: int

    @property
    def where(self) -> str:
        return f"{module_path(self.source)}:{self.line}"


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the top packages."""
    found = {}
    for top in TOP_PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def module_path(module: str) -> str:
    path = modules().get(module)
    return str(path.relative_to(ROOT)) if path is not None else module


def is_package(module: str) -> bool:
    return modules()[module].name == "__init__.py"


def unit_of(module: str) -> str:
    """The longest unit that is the module or contains it."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        candidate = ".".join(parts[:size])
        if candidate in STANDS_ON:
            return candidate
    raise KeyError(module)


def _ours(name: str) -> bool:
    return name.split(".")[0] in TOP_PACKAGES


def _existing(name: str) -> str | None:
    """The module `name` names, or the nearest existing package above it (`a.b.attr` -> `a.b`)."""
    while name:
        if name in modules():
            return name
        name = name.rpartition(".")[0]
    return None


@dataclass
class Scanned:
    imports: list[Import]
    external: list[tuple[str, tuple[str, ...], int]]  # (module, names, line) from outside
    private_attributes: list[tuple[str, str, int]]  # (module alias target, attribute, line)


@cache
def scan(module: str) -> Scanned:
    path = modules()[module]
    return scan_source(module, path.read_text(encoding="utf-8"), is_package(module))


def scan_source(module: str, source: str, package_init: bool = False) -> Scanned:
    """The imports of `source`, the text of `module` (an `__init__` when `package_init`)."""
    tree = ast.parse(source, module)
    package = module if package_init else module.rpartition(".")[0]
    imports: list[Import] = []
    external: list[tuple[str, tuple[str, ...], int]] = []
    aliases: dict[str, str] = {}  # local name bound to one of our modules -> that module

    def add(target: str, names: tuple[str, ...], line: int) -> None:
        if not _ours(target):
            external.append((target, names, line))
            return
        if names:  # `from pkg import sub` imports the submodule pkg.sub
            submodules = [n for n in names if f"{target}.{n}" in modules()]
            for name in submodules:
                imports.append(Import(module, f"{target}.{name}", (), line))
            names = tuple(n for n in names if n not in submodules)
            if not names and submodules:
                return
        resolved = _existing(target)
        assert resolved is not None, f"{module_path(module)}:{line}: no module {target}"
        imports.append(Import(module, resolved, names, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, (), node.lineno)
                if _ours(alias.name) and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = tuple(alias.name for alias in node.names)
            add(target, names, node.lineno)
            for alias in node.names:
                if _ours(target) and f"{target}.{alias.name}" in modules():
                    aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and _is_import_call(node.func)):
            add(node.args[0].value, (), node.lineno)
    private_attributes = [
        (aliases[node.value.id], node.attr, node.lineno) for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id in aliases and _private(node.attr)]
    return Scanned(imports, external, private_attributes)


def _is_import_call(func: ast.expr) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def all_imports() -> list[Import]:
    return [found for module in modules() for found in scan(module).imports]


def module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in modules()}
    for found in all_imports():
        graph[found.source].add(found.target)
    return graph


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {unit: set() for unit in STANDS_ON}
    for found in all_imports():
        source, target = unit_of(found.source), unit_of(found.target)
        if source != target:
            graph[source].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node, or a node importing itself
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def _describe_cycle(component: list[str], imports: list[Import]) -> str:
    """The cycle's modules and the imports that tie them together."""
    members = set(component)
    ties = [f"  {found.where}: {found.source} imports {found.target}" for found in imports
            if found.source in members and found.target in members]
    return " <-> ".join(component) + "\n" + "\n".join(ties)


def _describe_unit_cycle(component: list[str], imports: list[Import]) -> str:
    """The cycle's units and, for each edge between them, the first import that makes it."""
    members = set(component)
    first: dict[tuple[str, str], Import] = {}
    for found in imports:
        edge = (unit_of(found.source), unit_of(found.target))
        if edge[0] != edge[1] and set(edge) <= members:
            first.setdefault(edge, found)
    ties = [f"  {source} -> {target}, e.g. {found.where}: imports {found.target}"
            for (source, target), found in sorted(first.items())]
    return " <-> ".join(component) + "\n" + "\n".join(ties)


def _judge(kind: str, found: dict[str, str], title: str) -> None:
    """`found` maps each violation's key ("<kind> ...") to its description. Fails on a key not in
    PENDING, and on a PENDING key of this kind that is no longer found."""
    new = [text for key, text in sorted(found.items()) if key not in PENDING]
    assert not new, title + "\n" + "\n".join(new)
    gone = sorted(key for key in PENDING if key.startswith(kind + " ") and key not in found)
    assert not gone, f"fixed: remove these from PENDING in tests/test_architecture.py: {gone}"


@cache
def allowed(unit: str) -> frozenset[str]:
    """The units `unit` may import: what it stands on, transitively, and the leaves."""
    seen: set[str] = set(LEAVES)
    todo = list(STANDS_ON[unit])
    while todo:
        below = todo.pop()
        if below not in seen:
            seen.add(below)
            todo.extend(STANDS_ON[below])
    return frozenset(seen)


# --- the checker checked ----------------------------------------------------------------------

def test_the_scanner_sees_every_kind_of_import() -> None:
    source = """
import npu_migrate.core.sources as sources
from . import imports
from .facts import _private_helper, FileFacts
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from npu_migrate.apply.engine import RuleSet

def late():
    from codemods.rules import npu130_amp_device
    import importlib
    return importlib.import_module("npu_migrate.core.diffs"), sources._decode
"""
    found = scan_source("codemods.model.example", source)
    assert {(i.target, i.names) for i in found.imports} == {
        ("npu_migrate.core.sources", ()), ("codemods.model.imports", ()),
        ("codemods.model.facts", ("_private_helper", "FileFacts")),
        ("npu_migrate.apply.engine", ("RuleSet",)), ("codemods.rules.npu130_amp_device", ()),
        ("npu_migrate.core.diffs", ())}
    assert [(target, names) for target, names, _ in found.external] == [
        ("typing", ("TYPE_CHECKING",)), ("importlib", ())]
    assert [(target, attribute) for target, attribute, _ in found.private_attributes] == [
        ("npu_migrate.core.sources", "_decode")]


def test_cycles_are_found_and_a_dag_has_none() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": set()}) == [["a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_layer_order_allows_down_and_forbids_up() -> None:
    assert "npu_migrate.core" in allowed("codemods.rules")  # through the rule API and the analyses
    assert "codemods.model" in allowed("codemods.rules")
    assert "codemods.rules" not in allowed("codemods.analyses")
    assert "codemods.analyses" not in allowed("codemods.api")
    assert "codemods.api" not in allowed("npu_migrate.core")
    assert "npu_migrate.apply" not in allowed("npu_migrate.memory")
    assert "npu_migrate.emulation" not in allowed("npu_migrate.analyze")


def test_the_import_check_reports_a_module_that_does_not_import() -> None:
    result = subprocess.run([sys.executable, "-c", _IMPORT_EACH, json.dumps(["npu_migrate.core.no_such"]),
                             "[]"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "ModuleNotFoundError" in json.loads(result.stdout)["npu_migrate.core.no_such"]


# --- the tests ------------------------------------------------------------------------------

def test_every_module_belongs_to_a_declared_layer() -> None:
    strays = [module for module in modules() if not any(
        module == unit or module.startswith(unit + ".") for unit in STANDS_ON)]
    assert not strays, f"modules outside every layer (add them to STANDS_ON and the doc): {strays}"
    assert set(STANDS_ON) <= set(modules()), "STANDS_ON names a unit that does not exist"


def test_the_declared_layers_have_no_cycle() -> None:
    declared = {unit: set(below) for unit, below in STANDS_ON.items()}
    assert cycles(declared) == []


def test_no_module_level_import_cycle() -> None:
    imports = all_imports()
    found = {"cycle " + " <-> ".join(c): _describe_cycle(c, imports) for c in cycles(module_graph())}
    _judge("cycle", found, "module import cycles (imports at any depth count):")


def test_no_package_level_cycle() -> None:
    imports = all_imports()
    found = cycles(unit_graph())
    assert not found, "package (layer) cycles:\n" + "\n".join(
        _describe_unit_cycle(c, imports) for c in found)


def test_imports_follow_the_layer_order() -> None:
    wrong = []
    for found in all_imports():
        source, target = unit_of(found.source), unit_of(found.target)
        if source != target and target not in allowed(source):
            wrong.append(f"  {found.where}: {source} must not import {target} ({found.target})")
    assert not wrong, "imports against the layer order (see docs/architecture.md):\n" + "\n".join(wrong)


def test_top_level_init_files_import_nothing_of_ours() -> None:
    wrong = [found.where for found in all_imports() if found.source in TOP_PACKAGES]
    assert not wrong, f"top-level __init__ files must stay leaves: {wrong}"


def test_rules_never_import_each_other() -> None:
    found = {f"rule {i.source} -> {i.target}": f"  {i.where}: {i.source} imports {i.target}"
             for i in all_imports() if unit_of(i.source) == RULES_UNIT
             and unit_of(i.target) == RULES_UNIT and i.source != RULES_UNIT}
    _judge("rule", found, "a rule imports another rule module; move the shared helper into "
                          "the layers below (codemods.families or codemods.analyses):")


def test_no_private_libcst_module_or_name() -> None:
    wrong = []
    for module in modules():
        for target, names, line in scan(module).external:
            if target.split(".")[0] != "libcst":
                continue
            private = [part for part in target.split(".") + list(names) if _private(part)]
            if private:
                wrong.append(f"  {module_path(module)}:{line}: {target} {', '.join(names)}".rstrip())
    assert not wrong, "private LibCST modules or names (use the public API):\n" + "\n".join(wrong)


def test_no_private_name_across_layers() -> None:
    found = {}
    for i in all_imports():
        if unit_of(i.source) == unit_of(i.target):
            continue
        private = [part for part in i.target.split(".") if _private(part)]
        private += [name for name in i.names if _private(name)]
        if private:
            found[f"private {i.source} -> {i.target}"] = (
                f"  {i.where}: {i.source} uses {i.target} {', '.join(private)}")
    for module in modules():
        for target, attribute, line in scan(module).private_attributes:
            if unit_of(module) != unit_of(target):
                found[f"private {module} -> {target}.{attribute}"] = (
                    f"  {module_path(module)}:{line}: {module} uses {target}.{attribute}")
    _judge("private", found, "private modules or names used from another layer:")


# Each module is imported in a fresh child forked from one clean interpreter: per-module
# isolation (nothing of ours imported before) at the price of one interpreter start-up. The
# third-party modules ours import are imported first, in the parent, so no child pays for them.
_IMPORT_EACH = """
import importlib, json, os, sys
for external in json.loads(sys.argv[2]):
    try:
        importlib.import_module(external)
    except Exception:
        pass  # optional (torch_npu) or broken: the child that needs it will say so
assert not any(m.split(".")[0] in ("npu_migrate", "codemods") for m in sys.modules)
failures = {}
for name in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        message = ""
        try:
            module = importlib.import_module(name)
            where = os.path.realpath(module.__file__)
            if not where.startswith(os.path.realpath(os.getcwd()) + os.sep):
                message = f"imported from {where}, not from this checkout"
        except BaseException as error:
            message = f"{type(error).__name__}: {error}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    if message:
        failures[name] = message
print(json.dumps(failures))
"""


def test_every_module_imports_from_a_plain_checkout() -> None:
    # `__main__` modules run the program when imported; their importers are checked instead
    names = [m for m in modules() if not m.endswith("__main__")]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout only
    externals = sorted({target for module in modules() for target, _, _ in scan(module).external
                        if target and not target.startswith("__future__")})
    result = subprocess.run([sys.executable, "-c", _IMPORT_EACH, json.dumps(names), json.dumps(externals)],
                            cwd=ROOT,
                            capture_output=True, text=True, timeout=600,
                            env=environment, check=False)
    assert result.returncode == 0, result.stderr
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert not failures, "modules that do not import:\n" + "\n".join(
        f"  {name}: {message}" for name, message in failures.items())


def _doc_layers() -> dict[str, tuple[str, ...]]:
    """The layer table of docs/architecture.md: folder -> the folders it stands on, as units."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The layers, bottom up", 1)[1].split("\n## ", 1)[0]
    found: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[1].startswith("`"):
            continue
        def unit(folder: str) -> str:
            return folder.strip("`").removesuffix(".py").replace("/", ".")
        below = () if cells[2] == "nothing of ours" else tuple(unit(f) for f in cells[2].split(", "))
        found[unit(cells[1])] = below
    return found


def test_the_layer_table_in_the_docs_is_the_enforced_one() -> None:
    declared = {unit: below for unit, below in STANDS_ON.items() if unit not in LEAVES}
    documented = _doc_layers()
    assert documented == declared, (
        "docs/architecture.md's layer table and STANDS_ON differ:\n"
        + "\n".join(f"  {unit}: doc {documented.get(unit)} vs test {declared.get(unit)}"
                    for unit in sorted(set(documented) | set(declared))
                    if documented.get(unit) != declared.get(unit)))


def test_no_line_of_ours_reads_as_a_module_level_torch_npu_import() -> None:
    """Without CANN `import torch_npu` breaks `import torch`: our packages import it only where
    guarded, and a rule's examples are indented inside their case strings (`unindent` strips it),
    so no line starts like a top-level import of it (what a reader or a grep takes for one)."""
    found = [f"{path.relative_to(ROOT)}:{number}"
             for package in ("npu_migrate", "codemods") for path in sorted((ROOT / package).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if line.startswith(("import torch_npu", "from torch_npu"))]
    assert found == []

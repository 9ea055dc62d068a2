"""CUDA-only code: the libraries that run on NVIDIA GPUs only, and the project's own modules and
functions that reach them.

A guard such as `if x.is_cuda: return dtw_cuda(x)` selects CUDA-only code even when the branch
names no CUDA-only library itself: `dtw_cuda` may import `.triton_ops`, a module of the project
that imports `triton`. NPU511 keeps such a guard on CUDA. What it needs from other files comes
from the project fact `CUDA_ONLY_MODULES`, merged over every file of the package root (so a
file's result does not depend on which files a run migrates), and handed to the rule in its
options.
"""

from __future__ import annotations

import ast
import bisect
import functools
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from codemods.data.catalogue import best_import_entry, cuda_only_libraries, cuda_only_library, is_cuda_only
from codemods.api.facts import Project, ProjectFact, SourceFile, local_project
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.filemodel import FileModel

# a Hugging Face Hub repo id of a flash-attention kernel (`kernels-community/flash-attn3`): what
# such a repo holds is built for NVIDIA GPUs, loaded with the `kernels` package (which itself is
# not CUDA-only: it loads an NPU build where a repo has one)
HUB_FLASH_ATTENTION = re.compile(r"[\w.-]+/flash[-_]?(?:attn|attention)[\w.-]*", re.IGNORECASE)
_HUB_LOADERS = frozenset({"get_kernel", "has_kernel", "get_locked_kernel", "load_kernel"})
PROJECT_OPTION = "cuda_only_modules"  # the rule-options key holding the project's CUDA-only modules
__all__ = ["cuda_only_library"]  # re-exported for the rules: the catalogue answers it


@functools.cache
def _library_import() -> re.Pattern[bytes]:
    """An import line naming a CUDA-only library of the catalogue (`from numba import cuda` names
    `numba`: the parse decides)."""
    heads = sorted({name.split(".")[0] for name in cuda_only_libraries()})
    return re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:" + b"|".join(re.escape(name.encode()) for name in heads)
                      + rb")\b", re.MULTILINE)


# -- the project: which of its modules import CUDA-only code at module level -----------------------

def relative_target(path: str, level: int, module: str | None) -> list[str]:
    """The files a relative import in `path` can mean (`from ..a.b import c` -> `../a/b.py`,
    `../a/b/__init__.py`), as absolute paths."""
    base = os.path.dirname(os.path.abspath(path))
    for _ in range(level - 1):
        base = os.path.dirname(base)
    stem = os.path.join(base, *module.split(".")) if module else base
    return [stem + ".py", os.path.join(stem, "__init__.py")]


def _top_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported: not those inside functions or classes."""
    for node in _top_level_statements(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _top_level_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements that run when the module is imported (inside module-level `if`/`try` too)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, name, None) or [])


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _required_imports(statements: list[ast.stmt],
                      module: list[ast.stmt] | None = None) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports a module cannot be imported without: unconditional ones at module level, and those
    in a `try` whose import-error handler raises again (whisper's `triton_ops.py`). An import under
    an `if`, or in a `try` that falls back (timm's `except ImportError: amp = None`), is optional:
    the module works without the library, so it is not CUDA-only; unless the module's own
    top-level code uses the name anyway (litgpt's unsloth kernels: `if _TRITON_AVAILABLE: import
    triton`, then `@triton.jit` on a top-level function), which it cannot without the library."""
    module = statements if module is None else module
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Try):
            catching = [h for h in node.handlers if h.type is None or any(
                isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in ast.walk(h.type))]
            if all(h.body and isinstance(h.body[-1], ast.Raise) for h in catching):
                yield from _required_imports(node.body, module)
            yield from _required_imports(node.finalbody, module)
        elif isinstance(node, ast.With):
            yield from _required_imports(node.body, module)
        elif isinstance(node, ast.If):
            guarded = [i for i in node.body if isinstance(i, (ast.Import, ast.ImportFrom))]
            if guarded:
                used = _loaded_at_import(module, node)
                yield from (i for i in guarded if any((a.asname or a.name).split(".")[0] in used for a in i.names))


def _loaded_at_import(module: list[ast.stmt], skip: ast.stmt) -> set[str]:
    """Names the module's top-level code loads when it is imported (decorators, bases and
    default values of its functions and classes, its other statements), `skip` left out."""
    found: set[str] = set()
    for stmt in module:
        if stmt is skip or isinstance(stmt, (ast.If, ast.Try)):
            continue  # another guarded block may use the name under the same guard
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parts: list[ast.AST] = list(stmt.decorator_list)
            if isinstance(stmt, ast.ClassDef):
                parts += [*stmt.bases, *stmt.keywords]
            else:
                parts += [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
        else:
            parts = [stmt]
        found |= {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return found


# an import that runs when its module is imported, as a summary keeps it:
# ["import", [name, ...]] or ["from", level, module or None, [name, ...]]
ImportRecord = list[Any]


class CudaOnlyModules(ProjectFact):
    """NPU511's and NPU311's index of a package root:
    `{"files": {abspath: why}, "modules": {dotted name: why}, "extensions": {module name: why}}`:
    the CUDA extensions the root builds (`CUDAExtension(...)` in its setup scripts), and the
    root's files that import a CUDA-only library or such an extension when they are imported,
    directly or through another such file (followed until nothing new is found; a module of a
    package whose `__init__` is such a file is one too). `why` names the library and the file:
    "`triton` (in `pkg/triton_ops.py`)".

    A file's summary keeps its import lines that can be required ones (no parse), the extensions
    it builds (parsed only when it spells `CUDAExtension`) and, when a line names a CUDA-only
    library, its required imports (`required_imports`). The merge follows the modules found
    through the lines that name them, asking such a file for its required imports only then."""

    key = PROJECT_OPTION
    version = 2  # 2: `inline_imports`

    def summarize(self, source: SourceFile) -> dict[str, Any] | None:
        lines = _ImportLines(source.data)
        candidates = [line for start, line in lines.lines if lines.required(start, line)]
        summary: dict[str, Any] = {}
        if candidates:
            summary["lines"] = [line.decode("latin-1") for line in candidates]
        if _EXTENSION_TEXT in source.data and source.tree is not None:
            extensions = _extension_names(source.tree)
            if extensions:
                summary["extensions"] = extensions
        if any(_library_import().match(line) for line in candidates):  # each is a whole line
            summary["required"] = required_imports(source)
        if candidates and _INLINE_IMPORT.search(source.data):
            summary["inline_imports"] = True  # an import no line opens with: its lines do not tell all
        return summary or None

    def merge(self, project: Project) -> dict[str, dict[str, str]]:
        python = project.files()
        summaries: dict[str, dict[str, Any]] = dict(project.summaries(self))
        by_module = project.modules()
        extensions: dict[str, str] = {}
        for path in python:
            for name in summaries.get(path, {}).get("extensions", ()):
                extensions.setdefault(name, f"`{name}`, a CUDA extension (built in `{project.relative(path)}`)")
        found: dict[str, str] = {}
        pattern: re.Pattern[bytes] | None = _library_import()
        if extensions:  # an import line naming one of the project's CUDA extensions
            pattern = re.compile(_library_import().pattern + rb"|\b(?:" + b"|".join(
                re.escape(last_part(n).encode()) for n in sorted(extensions)) + rb")\b", re.MULTILINE)
        while pattern is not None:
            new: dict[str, str] = {}
            for path in python:
                summary = summaries.get(path)
                if path in found or not summary or not any(
                        pattern.search(line.encode("latin-1")) for line in summary.get("lines", ())):
                    continue
                if "required" not in summary and _lines_lead_nowhere(summary, path, by_module, found, project,
                                                                     extensions):
                    continue  # its required imports are among its import lines: no parse to ask them
                required = summary["required"] if "required" in summary else project.analyse(path, required_imports)
                why = required is not None and _imports_cuda_only(required, path, by_module, found, project,
                                                                  extensions)
                if why:
                    new[path] = why
            stems = sorted({os.path.splitext(os.path.basename(p))[0] if not p.endswith("__init__.py")
                            else os.path.basename(os.path.dirname(p)) for p in new})
            # importing any module of a package runs the package's `__init__` first (others reach
            # those modules through the package's name, already among the stems)
            packages = [os.path.dirname(p) + os.sep for p in new if p.endswith(os.sep + "__init__.py")]
            for path in python:
                if path not in found and path not in new:
                    inside = next((d for d in packages if path.startswith(d)), None)
                    if inside is not None:
                        new[path] = new[inside + "__init__.py"]
            found.update(new)
            pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(s.encode()) for s in stems) + rb")\b") \
                if stems else None
        modules = {name: found[path] for name, paths_of in by_module.items() if len(paths_of) == 1
                   for path in paths_of if path in found}
        result: dict[str, dict[str, str]] = {"files": found, "modules": modules} if found else {}
        if extensions:
            result["extensions"] = extensions
        return result


CUDA_ONLY_MODULES = CudaOnlyModules()


def project_cuda_only_modules(paths: Iterable[str], root: str) -> dict[str, dict[str, str]]:
    """`CUDA_ONLY_MODULES` of the files `paths` as one package root at `root`, nothing cached."""
    return CUDA_ONLY_MODULES.merge(local_project([CUDA_ONLY_MODULES], paths, root))


def required_imports(source: SourceFile) -> list[ImportRecord] | None:
    """The imports the module cannot be imported without (`_required_imports`), in order, as
    records; None when the file does not parse."""
    if source.tree is None:
        return None
    return [["import", [alias.name for alias in node.names]] if isinstance(node, ast.Import)
            else ["from", node.level, node.module, [alias.name for alias in node.names]]
            for node in _required_imports(source.tree.body)]


# `x = 1; import y`, `if ok: import y`: an import on a line that does not open with it
_INLINE_IMPORT = re.compile(rb"[;:][ \t]*(?:import|from)[ \t]")


def _lines_lead_nowhere(summary: dict[str, Any], path: str, by_module: Mapping[str, set[str]],
                        found: Mapping[str, str], project: Project, extensions: Mapping[str, str]) -> bool:
    """Whether none of a file's import lines can lead to CUDA-only code, each read alone. Its
    required imports are among those lines, so then they cannot either: the file needs no parse.
    False where a line does not parse alone (`from x import (`) or an import opens no line."""
    if summary.get("inline_imports"):
        return False
    records: list[ImportRecord] = []
    for line in summary.get("lines", ()):
        try:
            statements = ast.parse(line.strip()).body
        except (SyntaxError, ValueError):
            return False
        for node in statements:
            if isinstance(node, ast.Import):
                records.append(["import", [alias.name for alias in node.names]])
            elif isinstance(node, ast.ImportFrom):
                records.append(["from", node.level, node.module, [alias.name for alias in node.names]])
    return not _imports_cuda_only(records, path, by_module, found, project, extensions)


def _import_node(record: ImportRecord) -> ast.Import | ast.ImportFrom:
    if record[0] == "import":
        return ast.Import(names=[ast.alias(name=name) for name in record[1]])
    return ast.ImportFrom(module=record[2], names=[ast.alias(name=name) for name in record[3]], level=record[1])


_EXTENSION_TEXT = b"CUDAExtension"


def last_part(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _extension_names(tree: ast.Module) -> list[str]:
    """The modules a setup script builds from CUDA sources (`CUDAExtension("pkg._C", [...])` or
    `name=`), which cannot be built on an Ascend host, so no import of them can succeed there
    (Swin-Transformer's `swin_window_process`)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or (ast_dotted_parts(node.func) or [""])[-1] != "CUDAExtension":
            continue
        name = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value:
            found.append(name.value)
    return found


def extension_imported(node: ast.Import | ast.ImportFrom, extensions: Mapping[str, str]) -> str | None:
    """The project's CUDA extension an import brings in, or None. An absolute import names it
    whole (`import pkg._C`, `from pkg import _C`); a relative one by its last part (`from . import _C`)."""
    if not extensions:
        return None
    if isinstance(node, ast.ImportFrom) and node.level:
        parts = {last_part(node.module)} if node.module else set()
        parts |= {alias.name for alias in node.names}
        return next((n for n in sorted(extensions) if last_part(n) in parts), None)
    modules = _imported_modules(node)
    return next((n for n in sorted(extensions) if n in modules), None)


# each keyword alone opens with a literal, which `re` scans for fast (3x a `^[ \t]*(?:import|from)`
# pattern over torch's sources)
_IMPORT_KEYWORDS = (re.compile(rb"import[ \t]"), re.compile(rb"from[ \t]"))
_MARGIN_LINE = re.compile(rb"^[^\s#]", re.MULTILINE)  # a statement line at the margin
_BLOCK_AT_MARGIN = re.compile(rb"^(?:try|with|except|else|finally|if)\b", re.MULTILINE)


class _ImportLines:
    """A file's import lines, and which of them can hold a required import: at the margin, or
    indented under a `try`/`with` block at the margin (the nearest margin line above opens or
    continues one), or under an `if` at the margin (required when the module's top-level code uses
    the name anyway); imports in functions and classes never are. The block lines at the margin
    are found only for a file with an indented import line."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.lines = _lines_opening_with_import(data)
        self._blocks: list[int] | None = None

    def required(self, start: int, line: bytes) -> bool:
        if not line[:1].isspace():
            return True
        if self._blocks is None:
            self._blocks = [m.start() for m in _BLOCK_AT_MARGIN.finditer(self.data)]
        above = bisect.bisect_right(self._blocks, start) - 1
        if above < 0:
            return False
        # the nearest block line above, with no other line at the margin between it and this one
        after = self.data.find(b"\n", self._blocks[above], start) + 1
        return after > 0 and _MARGIN_LINE.search(self.data, after, start) is None


def _lines_opening_with_import(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, text) of the lines whose first word is `import` or `from`, in order."""
    found: dict[int, bytes] = {}
    for keyword in _IMPORT_KEYWORDS:
        for match in keyword.finditer(data):
            start = data.rfind(b"\n", 0, match.start()) + 1
            if start not in found and not data[start:match.start()].strip(b" \t"):
                end = data.find(b"\n", match.start())
                found[start] = data[start:end if end >= 0 else len(data)]
    return sorted(found.items())


def _imports_cuda_only(required: list[ImportRecord], path: str, by_module: Mapping[str, set[str]],
                       found: Mapping[str, str], project: Project, extensions: Mapping[str, str]) -> str | None:
    for record in required:
        node = _import_node(record)
        extension = extension_imported(node, extensions)
        if extension:
            return f"`{extension}` (in `{project.relative(path)}`), a CUDA extension"
        for module in _imported_modules(node):
            library = cuda_only_library(module) if not isinstance(node, ast.ImportFrom) or not node.level else None
            if library:
                return f"`{library}` (in `{project.relative(path)}`)"
        for target in _project_targets(node, path, by_module):
            if target in found:
                return found[target]
    return None


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    module = node.module or ""
    return [module] + [f"{module}.{alias.name}" for alias in node.names if module]


def _project_targets(node: ast.Import | ast.ImportFrom, path: str, by_module: Mapping[str, set[str]]) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.level:
        return _relative_targets(node, path)
    return [p for module in _imported_modules(node) if len(by_module.get(module, ())) == 1
            for p in by_module[module]]


def _relative_targets(node: ast.ImportFrom, path: str) -> list[str]:
    """The files `from .m import a` can mean: `m` itself, or `m.a` where `a` is a submodule."""
    submodules = [f"{node.module}.{alias.name}" if node.module else alias.name for alias in node.names]
    return [target for module in [node.module, *submodules] for target in relative_target(path, node.level, module)]


# -- one file: names and functions that lead to CUDA-only code -------------------------------------

@dataclass
class CudaOnlyNames:
    """In one file: local names bound to CUDA-only code (imported from a CUDA-only library or
    project module) and module-level functions whose bodies reach CUDA-only code, each with why."""

    names: dict[str, str] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    # availability flags: `has_apex = True` next to the `from apex... import ...` it vouches for,
    # in a module-level `try` (True only where the CUDA-only library imports)
    flags: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.names or self.functions)

    @classmethod
    def of(cls, tree: ast.Module, path: str, project: Mapping[str, Mapping[str, str]]) -> CudaOnlyNames:
        """The names of a file read outside a run (a run reads `cuda_only_names` of its model)."""
        return cuda_only_names(FileModel(path, "", tree), project)

    @classmethod
    def _build(cls, model: FileModel, project: Mapping[str, Mapping[str, str]]) -> CudaOnlyNames:
        tree, path = model.tree, model.path
        result = cls()
        for node in _top_level_imports(tree):
            why = import_reason(node, path, project)
            if why:
                for alias in node.names:
                    result.names[(alias.asname or alias.name).split(".")[0]] = why
        for name, why in _compiled_extensions(tree):
            result.names.setdefault(name, why)
        for statement in tree.body:
            if isinstance(statement, ast.Try):
                why = next((r for n in statement.body if isinstance(n, (ast.Import, ast.ImportFrom))
                            and (r := import_reason(n, path, project))), None)
                if why is None:
                    continue
                for assign in statement.body:
                    if isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Constant) \
                            and assign.value.value is True:
                        result.flags.update({t.id: why for t in assign.targets if isinstance(t, ast.Name)})
        # classes count as functions do: `Op.apply(x)` of a `torch.autograd.Function` whose
        # `forward` calls a compiled kernel selects that kernel
        functions = {s.name: s for s in tree.body
                     if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        reads = model.derived(_top_level_reads)
        # a function that JIT-builds a plugin from CUDA sources (StyleGAN's `_init()`:
        # `_plugin = custom_ops.get_plugin(sources=['bias_act.cpp', 'bias_act.cu'])`) makes the
        # globals it sets CUDA-only too: `_plugin.bias_act(...)` elsewhere runs that plugin
        for name, function in functions.items():
            source = next((os.path.basename(value) for kind, value in reads.get(id(function), ())
                           if kind is _TEXT and value.endswith(_CUDA_SOURCE_SUFFIXES)), None)
            if source is not None:
                why = f"a CUDA plugin built from `{source}` (in `{name}()`)"
                for declared in (n for n in ast.walk(function) if isinstance(n, ast.Global)):
                    result.names.update({g: why for g in declared.names if g not in result.names})
        # each body is read once: what can make it CUDA-only, in walk order; then a function
        # that calls a CUDA-only function is CUDA-only too, until nothing changes
        candidates = set(result.names) | set(functions)
        pending = {name: read for name, function in functions.items()
                   if (read := _events(reads.get(id(function), ()), path, project, candidates))[0] or read[1]}
        changed = True
        while changed:
            changed = False
            for name, (events, fallback) in pending.items():
                if name not in result.functions:
                    why = result._reason_of(events, fallback)
                    if why:
                        result.functions[name] = why
                        changed = True
        return result

    def _reason_of(self, events: list[tuple[bool, str]], fallback: str | None) -> str | None:
        for is_import, value in events:
            if is_import:
                return value
            why = self.names.get(value) or self.functions.get(value)
            if why:
                return why if value in self.names else f"`{value}`, which uses {why}"
        return fallback

    def reason_in(self, scope: ast.AST, path: str, project: Mapping[str, Mapping[str, str]],
                  around_line: int | None = None) -> str | None:
        """Why `scope` (a function, a class, a statement) reaches CUDA-only code, or None: a
        CUDA-only import or name, or a Hugging Face Hub flash-attention kernel it loads through
        `kernels` (nanochat's FA3 loader). With `around_line` (a guard inside `scope`), an `if`
        block that does not hold that line is left out: an import or call under another branch
        (`if args.use_bnb_linear: import bitsandbytes`) is an option of the scope, not the path the
        guard selects."""
        loads_hub_kernels, repo = False, None
        for node in _walk_around(scope, around_line):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                why = import_reason(node, path, project)
                if why:
                    return why
                loads_hub_kernels = loads_hub_kernels or hub_kernel_loader(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                why = self.names.get(node.id) or self.functions.get(node.id)
                if why:
                    return why if node.id in self.names else f"`{node.id}`, which uses {why}"
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.endswith(_CUDA_SOURCE_SUFFIXES):
                    return f"a CUDA plugin built from `{os.path.basename(node.value)}`"
                if repo is None and HUB_FLASH_ATTENTION.fullmatch(node.value):
                    repo = node.value
        return _hub_reason(repo) if loads_hub_kernels and repo else None


_CUDA_SOURCE_SUFFIXES = (".cu", ".cuh")


def cuda_only_names(model: FileModel, project: Mapping[str, Mapping[str, str]]) -> CudaOnlyNames:
    """The file's `CudaOnlyNames` against the project's CUDA-only modules (read through
    `model.derived(cuda_only_names, project)`: once per file, whichever piece asks)."""
    return CudaOnlyNames._build(model, project)


# what a scope can reach CUDA-only code through: an import (the node), a loaded name, a string
_IMPORT, _LOAD, _TEXT = "import", "load", "text"
Read = tuple[str, Any]


def _top_level_reads(model: FileModel) -> dict[int, list[Read]]:
    """id of each module-level function and class -> its reads, in `ast.walk` order. Read off the
    model's one breadth-first walk: restricted to a subtree, that is the subtree's own walk order."""
    tree = model.tree
    reads: dict[int, list[Read]] = {id(s): [] for s in tree.body
                                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    # id of a node -> id of the function or class around it at module level (None: none is);
    # the parents come in walk order, so a node's parent is placed before it (but for the
    # contexts and operators, `ast.Load()` and the like, which the parser shares: leaves of no
    # interest here, whose place in the order is their first use)
    top: dict[int, int | None] = {id(tree): None}
    top.update({id(s): id(s) if id(s) in reads else None for s in tree.body})
    for child, parent in model.parents.items():
        if child not in top:
            top[child] = top.get(id(parent))
    for node in model.of_type(ast.Import, ast.ImportFrom, ast.Name, ast.Constant):
        around = top[id(node)]
        if around is None:
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                reads[around].append((_LOAD, node.id))
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                reads[around].append((_TEXT, node.value))
        else:
            reads[around].append((_IMPORT, node))
    return reads


def _events(reads: Iterable[Read], path: str, project: Mapping[str, Mapping[str, str]],
            candidates: set[str]) -> tuple[list[tuple[bool, str]], str | None]:
    """What `reason_in` looks at in a scope, from its reads: in walk order, (True, why) for an
    import of CUDA-only code and (False, name) for a load of a name in `candidates`; and the Hub
    kernel the scope loads, the reason when nothing else is."""
    events: list[tuple[bool, str]] = []
    loads_hub_kernels, repo = False, None
    for kind, value in reads:
        if kind is _IMPORT:
            why = import_reason(value, path, project)
            if why:
                events.append((True, why))
            loads_hub_kernels = loads_hub_kernels or hub_kernel_loader(value)
        elif kind is _LOAD:
            if value in candidates:
                events.append((False, value))
        elif value.endswith(_CUDA_SOURCE_SUFFIXES):
            events.append((True, f"a CUDA plugin built from `{os.path.basename(value)}`"))
        elif repo is None and HUB_FLASH_ATTENTION.fullmatch(value):
            repo = value
    return events, _hub_reason(repo) if loads_hub_kernels and repo else None


def _cuda_source(scope: ast.AST) -> str | None:
    """The first CUDA source file (`kernel.cu`) a scope names, or None."""
    return next((os.path.basename(n.value) for n in ast.walk(scope) if isinstance(n, ast.Constant)
                 and isinstance(n.value, str) and n.value.endswith(_CUDA_SOURCE_SUFFIXES)), None)


def _hub_reason(repo: str) -> str:
    return f"`{repo}`, a Hugging Face Hub flash-attention kernel (built for NVIDIA GPUs)"


# mmcv's loader of its compiled ops, `ext_loader.load_ext('_ext', [...])` (also in the many
# projects that vendor mmcv): mmcv's guards pick these kernels over a PyTorch fallback on CUDA
# tensors (`if not x.is_cuda: return reference(x)`); the vendored copies carry no NPU build of them
_EXTENSION_LOADER = "ext_loader.load_ext"


def is_extension_loader(dotted: str) -> bool:
    """Whether a dotted callee is mmcv's `ext_loader.load_ext`, as mmcv or a vendored copy spells it."""
    return dotted == _EXTENSION_LOADER or dotted.endswith("." + _EXTENSION_LOADER)


def _compiled_extensions(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """Module-level names bound to a compiled extension: mmcv's `ext_module = ext_loader.load_ext(...)`,
    a JIT build from CUDA sources (BasicSR's `deform_conv_ext = load('deform_conv', sources=[...,
    'deform_conv_cuda_kernel.cu'])`, also under a module-level `if`), and torch's CUDA extension
    classes imported by name (`from torch.utils.cpp_extension import CUDAExtension`)."""
    for stmt in _top_level_statements(tree):
        if isinstance(stmt, ast.ImportFrom) and not stmt.level:
            for alias in stmt.names:
                entry = best_import_entry(f"{stmt.module}.{alias.name}")
                if entry is not None and entry["cuda"] == f"{stmt.module}.{alias.name}" \
                        and entry["kind"] == "extension" and is_cuda_only(entry):
                    yield alias.asname or alias.name, f"`{entry['cuda']}` (a CUDA extension build)"
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        source = _cuda_source(stmt.value)
        if source is not None:
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    yield target.id, f"a CUDA extension JIT-built from `{source}`"
            continue
        if stmt not in tree.body:
            continue
        func = stmt.value.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute))):
            continue
        loader = ast.unparse(func)
        if is_extension_loader(loader):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    yield target.id, f"mmcv's compiled CUDA ops (`{target.id} = {loader}(...)`)"


def _walk_around(scope: ast.AST, line: int | None) -> Iterator[ast.AST]:
    """`ast.walk(scope)` (the same order), without the `if` statements whose lines do not hold
    `line` (if given)."""
    if line is None:
        yield from ast.walk(scope)
        return
    todo = deque([scope])
    while todo:
        node = todo.popleft()
        if node is not scope and isinstance(node, ast.If) \
                and not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def hub_kernel_loader(node: ast.Import | ast.ImportFrom) -> bool:
    """`import kernels` or `from kernels import get_kernel, ...`: Hugging Face's Hub kernel loader
    (a project's own `kernels` package, Swin-Transformer's, imports other names)."""
    if isinstance(node, ast.Import):
        return any(alias.name == "kernels" for alias in node.names)
    return not node.level and node.module == "kernels" and any(alias.name in _HUB_LOADERS for alias in node.names)


def import_reason(node: ast.Import | ast.ImportFrom, path: str, project: Mapping[str, Mapping[str, str]]) -> str | None:
    """Why an import brings in CUDA-only code: a CUDA-only library, one of the project's CUDA
    extensions, or a project module that imports one."""
    extension = extension_imported(node, project.get("extensions", {}))
    if extension:
        return project["extensions"][extension]
    if not (isinstance(node, ast.ImportFrom) and node.level):
        for module in _imported_modules(node):
            library = cuda_only_library(module)
            if library:
                return f"`{library}`"
            why = project.get("modules", {}).get(module)
            if why:
                return why
        return None
    files = project.get("files", {})
    for target in _relative_targets(node, path):
        if target in files:
            return files[target]
    return None

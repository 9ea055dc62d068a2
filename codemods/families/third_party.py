"""NPU301-NPU314: CUDA-only third-party code (apex, flash-attn, xformers, bitsandbytes, Triton,
CuPy, NVML, CUDA extensions, channels_last, ...) is reported with its NPU route.

Nothing here rewrites: where a mapping is not exact (argument meanings, return values or
numerics differ) the report says what to write instead. The calls with an exact route
(flash-attn's functional API, xFormers' memory_efficient_attention, apex's fused norms and
optimizers) are rewritten by the rules built on `codemods.families.routes`. Entries live in the catalogue of
CUDA-only knowledge (`data/cuda_only.json`, `codemods.data.catalogue`); an import is reported
once, by the most specific entry that names it,
a call or attribute use where an entry asks for it, and a keyword argument (`load_in_8bit=`) of
any call where an entry is "at" "keyword". `cu_file_diagnostic` is the report for
a `.cu`/`.cuh` file found while walking a tree.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

import libcst as cst

from codemods.analyses.references import qualified_references
from codemods.api.rule import Fix, LineSpan, Rule
from codemods.data import catalogue
from codemods.model.cstnodes import dotted_name, dotted_parts, find_all, string_value
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Severity
from npu_migrate.core.discovery import CUDA_SUFFIXES

_IGNORED_TOKENS = {"load", "load_inline", "jit", "cuda", "kernel"}
# top modules whose name is a common word of CUDA code: their entries are found by the whole
# module name (`cuda.bindings`, `vllm._C`) or a `from cuda import ...` line
_GENERIC_HEADS = frozenset({"cuda", "vllm", "nvidia"})
_CUDA_TARGET = re.compile(r"cuda(?::\d+)?")
_CUDA_WORD = re.compile(r"cuda|cudnn|cublas|nccl|cufft|nvrtc", re.IGNORECASE)
_TARGET_KEYWORDS = frozenset({"target", "arch", "backend", "platform", "target_name"})  # not device keywords


_PYTHON_PLACES = frozenset({"import", "call", "reference", "name", "keyword"})

entries = catalogue.entries
best_import_entry = catalogue.best_import_entry


@cache
def _heads() -> frozenset[str]:
    return frozenset(e["cuda"].split(".")[0] for e in entries() if set(e["at"]) & (_PYTHON_PLACES - {"keyword"}))


def library_prefilter(code: str) -> str:
    """Import statements always spell the top module; a call or attribute use through an alias
    spells `.last_name`. Generic words (`torch`, `load`, `jit`, `cuda`) would match most files.
    Plain literals, no leading `\\b`: a literal start lets `re` skip ahead fast."""
    words: set[str] = set()
    for entry in entries():
        if entry.get("code") == code and "api-call" in entry["at"]:
            words.add(r"\.(?:" + entry["pattern"] + ")")  # `_lt.cublasLtCreate(...)`
        if entry.get("code") != code or not set(entry["at"]) & _PYTHON_PLACES:
            continue
        if "keyword" in entry["at"]:
            words.add(re.escape(entry["cuda"]) + r"\s*=")
            continue
        parts = entry["cuda"].split(".")
        if parts[0] != "torch" and "import" in entry["at"]:
            head = re.escape(parts[0])
            if parts[0] in _GENERIC_HEADS:  # `cuda.bindings`: `cuda` alone is in most files of a CUDA project
                words |= {rf"from\s+{head}[\s.]", rf"import\s+{head}\b"}
                if len(parts) > 1:
                    words.add(re.escape(entry["cuda"]))
            else:  # `cutlass` but not torch's `cutlass_utils`
                words.add(r"\b" + head + r"\b")
        if {"call", "reference"} & set(entry["at"]) and parts[-1] not in _IGNORED_TOKENS:
            # torch names may be imported by name (`from torch import channels_last`), and so may a
            # name whose import is not reported (`from transformers import BitsAndBytesConfig`)
            by_name = parts[0] == "torch" or "import" not in entry["at"]
            words.add(re.escape(parts[-1]) if by_name else r"\." + re.escape(parts[-1]))
    if code == "NPU311":
        words |= {r"\.cuh?[\"']", "cuda_sources", "with_cuda", "cpp_extension"}
    return "|".join(sorted(words)) if words else r"(?!)"


@cache
def _entries_by_place() -> dict[tuple[str | None, str], tuple[dict[str, Any], ...]]:
    """(code, place) -> the catalogue's entries of that code at that place, in catalogue order
    (asked for at every call and attribute a rule visits)."""
    found: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    for entry in entries():
        for at in dict.fromkeys(entry["at"]):
            found.setdefault((entry.get("code"), at), []).append(entry)
    return {key: tuple(group) for key, group in found.items()}


@lru_cache(maxsize=1 << 16)
def _import_code(module: str) -> str | None:
    """The code of the entry that reports an import of `module` (`ThirdPartyRule._report_import`)."""
    entry = best_import_entry(module)
    return entry.get("code") if entry is not None else None


@lru_cache(maxsize=1 << 16)
def _library_code(name: str) -> str | None:
    """The code of the entry of the CUDA-only library a qualified name belongs to, if any."""
    library = catalogue.cuda_only_library(name)
    return _import_code(library) if library else None


@cache
def _codes_by_word() -> tuple[dict[str, frozenset[str | None]], dict[str, frozenset[str | None]], re.Pattern[str] | None]:
    """The entries' names at "call"/"reference" and at "keyword", each -> the codes that report it,
    and one pattern for every "api-call" entry (None: there is none)."""
    named: dict[str, set[str | None]] = {}
    keywords: dict[str, set[str | None]] = {}
    patterns = []
    for entry in entries():
        places, code = set(entry["at"]), entry.get("code")
        if places & {"call", "reference"}:
            named.setdefault(entry["cuda"], set()).add(code)
        if "keyword" in places:
            keywords.setdefault(entry["cuda"], set()).add(code)
        if "api-call" in places:
            patterns.append(f"(?:{entry['pattern']})")
    return ({k: frozenset(v) for k, v in named.items()}, {k: frozenset(v) for k, v in keywords.items()},
            re.compile("|".join(patterns)) if patterns else None)


def _library_lines(model: FileModel) -> dict[str | None, list[LineSpan]] | None:
    """Where `ThirdPartyRule` can report in this file, by code: the imports it reports, the chains
    that qualify to an entry's name or to a CUDA API of a library of the code, the calls that give
    such a library a "cuda" target, the keywords of its "keyword" entries and the attributes its
    "api-call" patterns name. None where `_qualify` also spells chains out (a library's head
    imported, but no plain alias of the file). Once per file, for every code of the family."""
    facts = model.facts
    imported = {alias.name.split(".")[0] for node in model.of_type(ast.Import)
                if isinstance(node, ast.Import) for alias in node.names if alias.asname is None}
    if any(head not in facts.aliases for head in _heads() & imported):
        return None
    named, keywords, api_calls = _codes_by_word()
    found: dict[str | None, list[LineSpan]] = {}

    def add(codes: Iterable[str | None], spans: list[LineSpan]) -> None:
        for code in set(codes) - {None}:
            found.setdefault(code, []).extend(spans)

    for name, spans in model.derived(qualified_references).by_name.items():
        add([*named.get(name, ()), _library_code(name) if _CUDA_WORD.search(name) else None], spans)
    for node in model.of_type(ast.Import):
        if isinstance(node, ast.Import):
            add([_import_code(a.name) for a in node.names], [_span(node)])
    for node in model.of_type(ast.ImportFrom):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            add([_import_code(node.module if a.name == "*" else f"{node.module}.{a.name}") for a in node.names],
                [_span(node)])
    for call in _target_calls(model):
        parts = ast_dotted_parts(call.func)
        add([_library_code(facts.qualify(parts) or "")] if parts else [], [_span(call)])
    for node in model.of_type(ast.keyword) if keywords else ():
        if isinstance(node, ast.keyword) and node.arg in keywords:
            add(keywords[node.arg], [_span(node)])
    for node in model.of_type(ast.Attribute) if api_calls is not None else ():
        if isinstance(node, ast.Attribute) and api_calls is not None and api_calls.fullmatch(node.attr):
            add([code for (code, place), group in _entries_by_place().items() if place == "api-call"
                 and any(re.fullmatch(e["pattern"], node.attr) for e in group)], [_span(node)])
    return found


def _span(node: ast.stmt | ast.expr | ast.keyword) -> LineSpan:
    return node.lineno, node.end_lineno or node.lineno


def _target_calls(model: FileModel) -> list[ast.Call]:
    """The calls given a "cuda" target string (`_report_target`): positionally, or by a keyword
    that names a target."""
    parents = model.parents
    calls = []
    for node in model.of_type(ast.Constant):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and _CUDA_TARGET.fullmatch(node.value)):
            continue
        child: ast.AST = node
        holder = parents.get(id(node))
        if isinstance(holder, ast.Starred) or (isinstance(holder, ast.keyword) and holder.arg in _TARGET_KEYWORDS):
            child, holder = holder, parents.get(id(holder))
        if isinstance(holder, ast.Call) and child is not holder.func:
            calls.append(holder)
    return calls


def _family_visits_only(rule: type[Rule]) -> bool:
    """Whether a rule visits nodes with `ThirdPartyRule`'s methods alone (what `_library_lines` reads)."""
    return all(getattr(rule, name) is getattr(ThirdPartyRule, name, None)
               for name in dir(rule) if name.startswith(("visit_", "leave_")))


def severity_of(entry: dict[str, Any]) -> Severity | None:
    """The entry's own severity (an engine with no route is an error), or None: the rule's."""
    return Severity(entry["severity"]) if "severity" in entry else None


class ThirdPartyRule(Rule):
    fix = Fix.NONE
    severity = Severity.WARNING
    default = True

    def target_lines(self) -> list[LineSpan] | None:
        if not _family_visits_only(type(self)):
            return None  # a rule that visits more (NPU311) says nothing of it here
        found = self.context.model.derived(_library_lines)
        return None if found is None else found.get(self.code, [])

    def _entries(self, at: str) -> tuple[dict[str, Any], ...]:
        return _entries_by_place().get((self.code, at), ())

    def _qualify(self, node: cst.BaseExpression) -> str | None:
        parts = dotted_parts(node)
        if not parts:
            return None
        # FileFacts forgets a module alias once an assignment goes through it (`torch.x.y = ...`):
        # a chain spelled from a known library's own name still counts
        qualified = self.context.facts.qualify(parts)
        if qualified is None and parts[0] in _heads() and parts[0] in self._imported_heads():
            qualified = ".".join(parts)
        return qualified

    def _imported_heads(self) -> set[str]:
        heads = getattr(self, "_heads_cache", None)
        if heads is None:
            heads = {alias.name.split(".")[0] for node in self.context.model.of_type(ast.Import)
                     if isinstance(node, ast.Import) for alias in node.names if alias.asname is None}
            self._heads_cache = heads
        return heads

    def _report_import(self, node: cst.CSTNode, qualified: str) -> None:
        entry = best_import_entry(qualified)
        if entry is not None and entry.get("code") == self.code:
            self.report(node, f"`{qualified}`: {entry['message']}", severity=severity_of(entry))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            if name:
                self._report_import(alias, name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if not module:
            return
        if isinstance(node.names, cst.ImportStar):
            self._report_import(node, module)
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name:
                self._report_import(alias, f"{module}.{name}")

    def visit_Call(self, node: cst.Call) -> None:
        if not self._report_call(node):  # `BitsAndBytesConfig(load_in_4bit=True)`: said once
            self._report_keywords(node)
        self._report_target(node)
        self._report_c_api(node)

    def _report_c_api(self, node: cst.Call) -> None:
        """`_lt.cublasLtMatmul(...)`: NVIDIA's C library called directly (ctypes, cffi)."""
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        for entry in self._entries("api-call"):
            if re.fullmatch(entry["pattern"], func.attr.value):
                self.report(node, f"`{func.attr.value}`: {entry['message']}", severity=severity_of(entry))
                return

    def _report_target(self, node: cst.Call) -> None:
        """`"cuda"` passed to a CUDA-only library (TileLang's `CUDA("cuda")`, `tilelang.compile(f,
        target="cuda")`) names the library's GPU target, not a torch device: it stays, and is said so
        (never "write npu": the library has no NPU target)."""
        qualified = self._qualify(node.func)
        library = catalogue.cuda_only_library(qualified) if qualified else None
        entry = catalogue.best_import_entry(library) if library else None
        if entry is None or entry.get("code") != self.code:
            return
        for arg in node.args:
            if (arg.keyword is None or arg.keyword.value in _TARGET_KEYWORDS) \
                    and _CUDA_TARGET.fullmatch(string_value(arg.value) or ""):
                self.report(arg, f"`{string_value(arg.value)}` names {entry.get('library', library)}'s NVIDIA GPU target, "
                                 "not a torch device: it stays as written (the library has no NPU target; see the "
                                 "report at its import)", severity=Severity.INFO)
                return

    def _report_keywords(self, node: cst.Call) -> None:
        """`load_in_8bit=True` in any call (an entry at "keyword"): reported unless the value is
        a literal `False`/`None`, which asks for nothing CUDA-only."""
        wanted = self._entries("keyword")
        if not wanted:
            return
        for arg in node.args:
            if arg.keyword is None or _is_name(arg.value, "False", "None"):
                continue
            for entry in wanted:
                if entry["cuda"] == arg.keyword.value:
                    self.report(arg, f"`{arg.keyword.value}=`: {entry['message']}", severity=severity_of(entry))

    def _report_call(self, node: cst.Call) -> bool:
        """Report a call an entry names; whether one was reported."""
        wanted = self._entries("call")
        if not wanted:
            return False
        name = self._qualify(node.func)
        for entry in wanted:
            if entry["cuda"] != name:
                continue
            if "import" in entry["at"] and isinstance(node.func, cst.Name):
                continue  # imported by name: the import statement carries the report
            if entry.get("when") == "cuda_sources" and not _builds_cuda(node):
                if entry.get("message_computed") and _computed_sources(node):
                    self.report(node, entry["message_computed"])
                    return True
                continue
            self.report(node, entry["message"], severity=severity_of(entry))
            return True
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        inner = self.tree.nodes("inside_reported")
        if node in inner:
            return
        name = self._qualify(node)
        for entry in self._entries("reference"):
            if entry["cuda"] == name:
                self.report(node, entry["message"], severity=severity_of(entry))
                return
        if name is not None and self._cuda_api_of_library(node, name):
            inner.update(find_all(node.value, cst.Attribute))

    def _cuda_api_of_library(self, node: cst.Attribute, name: str) -> bool:
        """`cuda.CUstream` (cuda-python's driver), `cudnn.create_handle`, `cutlass.base_dsl.runtime.cuda.X`:
        a CUDA API reached through a CUDA-only library of this rule, spelled as code (not an import,
        which is reported as one). Reported once per chain, at its outermost attribute."""
        if self.context.in_import or not _CUDA_WORD.search(name):
            return False
        library = catalogue.cuda_only_library(name)
        entry = catalogue.best_import_entry(library) if library else None
        if entry is None or entry.get("code") != self.code or name == library:
            return False
        self.report(node, f"`{name}`: a CUDA API of {entry.get('library', library)} -- {entry['message']}",
                    severity=severity_of(entry))
        return True


def _is_name(node: cst.BaseExpression, *names: str) -> bool:
    return isinstance(node, cst.Name) and node.value in names


def _computed_sources(call: cst.Call) -> bool:
    """Whether a load(...) call's sources are computed (not a literal list of strings)."""
    for index, arg in enumerate(call.args):
        if (arg.keyword and arg.keyword.value == "sources") or (arg.keyword is None and index == 1):
            value = arg.value
            if isinstance(value, (cst.List, cst.Tuple)):
                return not all(isinstance(e.value, cst.SimpleString) for e in value.elements)
            return not isinstance(value, cst.SimpleString)
    return False


def _builds_cuda(call: cst.Call) -> bool:
    """Whether a cpp_extension load/load_inline call compiles CUDA code."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword else None
        if keyword in ("cuda_sources", "extra_cuda_cflags") and not _is_name(arg.value, "None"):
            return True
        if keyword == "with_cuda" and _is_name(arg.value, "True"):
            return True
        for string in find_all(arg.value, cst.SimpleString):
            if string.raw_value.endswith(CUDA_SUFFIXES):
                return True
    return False


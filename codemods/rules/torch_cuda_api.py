"""NPU120: `torch.cuda.<name>` becomes `torch.npu.<name>` for every name torch_npu provides;
NPU121: a `torch.cuda` name with no NPU counterpart is reported with what to do instead.

The names are data (`codemods/data/torch_cuda.json`). Aliases are resolved: `th.cuda.X`,
`from torch.cuda import X` (the import moves to `torch.npu`; names without a counterpart stay
in a `torch.cuda` import of their own), and module aliases (`import torch.cuda as tc`,
`from torch import cuda`), whose import is repointed at `torch.npu` when every use of the
alias is a name we rewrite. A `torch.cuda.<name>` in neither list is left to other rules.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import dotted_expr, dotted_name, Fix, Rule

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_cuda.json"
CUDA = "torch.cuda"
# `torch.cuda.X`, `cuda.X`, `from torch.cuda import`, `from torch import cuda[,)]`, `... cuda as`
PREFILTER = r"\bcuda\b(?:\.[A-Za-z_]|\s*[,)]|\s+(?:import|as)\b)|import[^\n]*\bcuda\b"


@dataclass(frozen=True)
class CudaNames:
    rewrites: dict[str, str]  # torch.cuda name -> attribute of torch.npu
    flags: dict[str, str]  # torch.cuda name -> what to do instead


@cache
def cuda_names() -> CudaNames:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    rewrites, flags = {}, {}
    for entry in data["entries"]:
        name = entry["cuda"].removeprefix("torch.cuda.")
        if entry["action"] == "rewrite":
            rewrites[name] = entry["npu"].removeprefix("torch.npu.")
        elif entry["action"] == "flag":
            flags[name] = entry["note"]
    return CudaNames(rewrites, flags)


@dataclass(frozen=True)
class AliasUse:
    """How a local name bound to the `torch.cuda` module is used in the whole file."""

    attrs: frozenset[str]
    bare: bool  # used other than as `alias.<name>`

    def blockers(self, rewrites: dict[str, str]) -> list[str]:
        found = sorted(self.attrs - rewrites.keys())
        return found + (["the module itself"] if self.bare else [])


def alias_uses(tree: ast.Module, local: str) -> AliasUse:
    attrs: set[str] = set()
    owners: set[int] = set()
    loads = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == local:
            attrs.add(node.attr)
            owners.add(id(node.value))
        elif isinstance(node, ast.Name) and node.id == local:
            loads += 1
    return AliasUse(frozenset(attrs), loads > len(owners))


def _npu_module(node: cst.BaseExpression) -> cst.BaseExpression:
    """`torch.cuda` (as written in an import) -> `torch.npu`."""
    assert isinstance(node, cst.Attribute)
    return node.with_changes(attr=cst.Name("npu"))


class TorchCudaApi(Rule):
    code = "NPU120"
    name = "torch-cuda-api"
    summary = "`torch.cuda.<name>` becomes `torch.npu.<name>` for the names torch_npu provides"
    fix = Fix.SAFE
    prefilter = PREFILTER
    needs_torch_npu = True

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self.names = cuda_names()
        self._alias_cache: dict[str, AliasUse] = {}

    def alias_use(self, local: str) -> AliasUse:
        if local not in self._alias_cache:
            self._alias_cache[local] = alias_uses(self.context.facts.tree, local)
        return self._alias_cache[local]

    # -- `torch.cuda.X` chains outside imports ---------------------------------------------------
    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        name = updated_node.attr.value
        if self.context.in_import or name not in self.names.rewrites:
            return updated_node
        owner = original_node.value
        if not (isinstance(owner, cst.Attribute) and owner.attr.value == "cuda"
                and self.resolve(owner) == CUDA):
            return updated_node  # module aliases (`tc.X`) are handled at their import
        new = self.names.rewrites[name]
        value = updated_node.value
        assert isinstance(value, cst.Attribute)
        self.fixed(original_node, f"`torch.cuda.{name}` → `torch.npu.{new}`")
        return updated_node.with_changes(value=value.with_changes(attr=cst.Name("npu")),
                                         attr=updated_node.attr.with_changes(value=new))

    # -- imports -------------------------------------------------------------------------------
    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        names = list(updated_node.names)
        changed = False
        for i, (orig, alias) in enumerate(zip(original_node.names, updated_node.names)):
            if alias.asname is None or dotted_name(alias.name) != CUDA:
                continue  # `import torch.cuda` binds `torch`: nothing to repoint
            local = _asname(alias)
            if local and self._alias_ready(original_node, local):
                names[i] = alias.with_changes(name=_npu_module(alias.name))
                self.fixed(orig, f"`import torch.cuda as {local}` → `import torch.npu as {local}`")
                changed = True
        return updated_node.with_changes(names=names) if changed else updated_node

    def leave_ImportFrom(self, original_node: cst.ImportFrom,
                         updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if updated_node.relative or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        module = dotted_name(updated_node.module)
        if module != "torch":
            return updated_node
        names = list(updated_node.names)
        changed = False
        for i, alias in enumerate(updated_node.names):
            if dotted_name(alias.name) != "cuda":
                continue
            local = _asname(alias) or "cuda"
            if self._alias_ready(original_node, local):
                asname = alias.asname or cst.AsName(name=cst.Name("cuda"))
                names[i] = alias.with_changes(name=cst.Name("npu"), asname=asname)
                self.fixed(original_node, f"`from torch import cuda` → `from torch import npu as {local}`")
                changed = True
        return updated_node.with_changes(names=names) if changed else updated_node

    def _alias_ready(self, node: cst.CSTNode, local: str) -> bool:
        """Repoint a `torch.cuda` module alias only when every use of it is a name we rewrite."""
        if self.context.facts.aliases.get(local) != CUDA:
            return False
        use = self.alias_use(local)
        if not use.attrs:
            return False
        blockers = use.blockers(self.names.rewrites)
        if blockers:
            self.report(node, f"`{local}` (torch.cuda) is also used for {', '.join(blockers)}, "
                              "which torch.npu lacks or other rules own; the alias stays CUDA: "
                              f"write `torch.npu.<name>` for its other uses by hand",
                        severity=Severity.WARNING)
            return False
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """`from torch.cuda import a, b` -> `from torch.npu import ...`; names torch.npu lacks keep
        a `torch.cuda` import of their own on the same line (never import a missing name)."""
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for orig, stmt in zip(original_node.body, updated_node.body):
            new = self._split_from_cuda(orig, stmt)
            changed |= new is not None
            body.extend(new if new is not None else [stmt])
        if not changed or len(original_node.body) != len(updated_node.body):
            return updated_node
        return updated_node.with_changes(body=body)

    def _split_from_cuda(self, orig: cst.BaseSmallStatement,
                         stmt: cst.BaseSmallStatement) -> list[cst.BaseSmallStatement] | None:
        if not (isinstance(stmt, cst.ImportFrom) and not stmt.relative
                and not isinstance(stmt.names, cst.ImportStar) and dotted_name(stmt.module) == CUDA):
            return None
        mine = [a for a in stmt.names if dotted_name(a.name) in self.names.rewrites]
        rest = [a for a in stmt.names if dotted_name(a.name) not in self.names.rewrites]
        if not mine:
            return None
        if not rest and all(self.names.rewrites[dotted_name(a.name) or ""] == dotted_name(a.name) for a in mine):
            moved = stmt.with_changes(module=_npu_module(stmt.module))
            self.fixed(orig, "`from torch.cuda import ...` → `from torch.npu import ...`")
            return [moved]
        moved_names = ", ".join(dotted_name(a.name) or "" for a in mine)
        split = split_import(stmt, [self._renamed(a) for a in mine], dotted_expr("torch.npu"), rest)
        if split is None:
            self.report(orig, f"`{moved_names}` should come from `torch.npu`, but the other names of "
                              "this import carry comments: split the import by hand",
                        severity=Severity.WARNING)
            return None
        self.fixed(orig, f"`{moved_names}` now imported from `torch.npu`; "
                         "the rest stays in a `torch.cuda` import")
        return list(split)

    def _renamed(self, alias: cst.ImportAlias) -> cst.ImportAlias:
        name = dotted_name(alias.name) or ""
        new = self.names.rewrites[name]
        if new == name:
            return alias
        return alias.with_changes(name=cst.Name(new), asname=alias.asname or cst.AsName(name=cst.Name(name)))


class TorchCudaNoCounterpart(Rule):
    code = "NPU121"
    name = "torch-cuda-no-counterpart"
    summary = "`torch.cuda` names with no NPU counterpart are reported with what to use instead"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = PREFILTER

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self.flags = cuda_names().flags

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = node.attr.value
        if name in self.flags and self.resolve(node.value) == CUDA:
            self.report(node, f"`torch.cuda.{name}`: {self.flags[name]}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar) or dotted_name(node.module) != CUDA:
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name in self.flags:
                self.report(alias, f"`torch.cuda.{name}`: {self.flags[name]}")


def _asname(alias: cst.ImportAlias) -> str | None:
    if alias.asname is None:
        return None
    name = alias.asname.name
    return name.value if isinstance(name, cst.Name) else None


def split_import(stmt: cst.ImportFrom, moved: list[cst.ImportAlias], module: cst.BaseExpression,
                 rest: list[cst.ImportAlias]) -> list[cst.ImportFrom] | None:
    """`from M import <rest>; from <module> import <moved>` on the line where `stmt` starts.

    The names that stay come first, on one line, so that both statements start on the same
    line (tools that cut a file at statement starts keep them together); the moved names keep
    the original parentheses, line breaks and comments. None when a name that stays carries a
    comment, which one line could not keep."""
    if any("#" in _EMPTY.code_for_node(alias) for alias in rest):
        return None
    single = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == len(rest) - 1 else
                             cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
              for i, a in enumerate(rest)]
    stay = stmt.with_changes(names=single, lpar=None, rpar=None)
    parenthesized = stmt.lpar is not None
    names = []
    for i, alias in enumerate(moved):
        last = i == len(moved) - 1
        if last and not parenthesized:
            alias = alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif not last and alias.comma is cst.MaybeSentinel.DEFAULT:
            alias = alias.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        names.append(alias)
    return [stay, stmt.with_changes(module=module, names=names)]


_EMPTY = cst.Module([])

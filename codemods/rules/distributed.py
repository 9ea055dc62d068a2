"""NPU140-NPU143: torch.distributed on HCCL instead of NCCL.

NPU140 rewrites backend strings where the code proves they are backends: the backend argument
of `init_process_group`/`new_group` (positional or keyword), `backend=`/`dist_backend=` of any
call, comparisons with a backend-valued expression (`backend == "nccl"`,
`dist.get_backend() in ("nccl", ...)`) and argparse `--dist-backend` defaults and choices.
NPU141 turns `Backend.NCCL` into `Backend.HCCL`, NPU142 `is_nccl_available` into
`is_hccl_available`; NPU143 reports `ProcessGroupNCCL`. Mapping: `codemods/data/distributed.json`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix, Rule
from codemods.rules.device_strings import code_of

DATA = Path(__file__).resolve().parent.parent / "data" / "distributed.json"
_PAIR = re.compile(r"(\w+):(\w+)")
_COMPARE = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


@dataclass(frozen=True)
class DistTable:
    backends: dict[str, str]
    devices: dict[str, str]
    functions: dict[str, dict[str, Any]]
    keywords: frozenset[str]
    names: tuple[str, ...]
    constants: dict[str, str]
    renames: dict[str, str]
    flags: dict[str, str]


@cache
def dist_table() -> DistTable:
    d = json.loads(DATA.read_text(encoding="utf-8"))
    return DistTable(d["backends"], d["devices"], d["functions"], frozenset(d["keywords"]),
                     tuple(d["names"]), d["constants"], d["renames"], d["flags"])


def backend_text(text: str, table: DistTable) -> str | None:
    """'nccl' -> 'hccl'; 'cuda:nccl,cpu:gloo' -> 'npu:hccl,cpu:gloo'; None when not a backend
    string with something to change."""
    if text in table.backends:
        return table.backends[text]
    if text.upper() != text and text.lower() in table.backends:
        return None  # odd casing: leave it
    if text.isupper() and text.lower() in table.backends:
        return table.backends[text.lower()].upper()
    pairs = text.split(",")
    out = []
    for pair in pairs:
        match = _PAIR.fullmatch(pair.strip())
        if not match:
            return None
        device, backend = match.groups()
        out.append(pair.replace(f"{device}:{backend}", f"{table.devices.get(device, device)}:"
                                                        f"{table.backends.get(backend, backend)}"))
    new = ",".join(out)
    return new if new != text else None


def backend_expr(node: cst.BaseExpression, table: DistTable) -> cst.BaseExpression | None:
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        new = backend_text(node.raw_value, table)
        return node.with_changes(value=f"{node.prefix}{node.quote}{new}{node.quote}") if new else None
    if isinstance(node, cst.IfExp):
        body, orelse = backend_expr(node.body, table), backend_expr(node.orelse, table)
        if body is None and orelse is None:
            return None
        return node.with_changes(body=body or node.body, orelse=orelse or node.orelse)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        elements, changed = [], False
        for element in node.elements:
            new_value = backend_expr(element.value, table) if isinstance(element, cst.Element) else None
            changed |= new_value is not None
            elements.append(element.with_changes(value=new_value) if new_value is not None else element)
        return node.with_changes(elements=elements) if changed else None
    return None


def _mentions_nccl(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return "nccl" in node.value.lower()
    if isinstance(node, cst.IfExp):
        return _mentions_nccl(node.body) or _mentions_nccl(node.orelse)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(isinstance(e, cst.Element) and _mentions_nccl(e.value) for e in node.elements)
    return False


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name) and node.func.value == "str" and len(node.args) == 1:
            return _last_name(node.args[0].value)
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


class _DistRule(Rule):
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"nccl|NCCL"
    needs_torch_npu = True

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self.table = dist_table()


class NcclBackend(_DistRule):
    code = "NPU140"
    name = "nccl-backend"
    summary = "`\"nccl\"` backends (init_process_group, new_group, comparisons, --dist-backend) become `\"hccl\"`"

    def _swap(self, original: cst.BaseExpression, updated: cst.BaseExpression,
              where: str) -> cst.BaseExpression:
        new = backend_expr(updated, self.table)
        if new is None:
            if isinstance(updated, cst.SimpleString) and "nccl" in updated.value.lower():
                self.report(original, f"`{code_of(original)}` in {where} mentions NCCL but is no "
                                      "backend string we know: port it to HCCL by hand")
            return updated
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` ({where})")
        return new

    def _backend_names(self, node: cst.BaseExpression) -> bool:
        last = _last_name(node)
        return last is not None and any(word in last.lower() for word in self.table.names)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not any(_mentions_nccl(a.value) for a in updated_node.args):
            return updated_node
        if len(original_node.args) != len(updated_node.args):
            return updated_node
        func = original_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            return self._argparse(original_node, updated_node)
        spec = self.table.functions.get(self.resolve(func) or "", {})
        position, keyword = spec.get("position"), spec.get("keyword")
        args = list(updated_node.args)
        changed = False
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, updated_node.args)):
            if arg.star:
                index = -1_000_000 if arg.star == "*" else index
                continue
            if arg.keyword is None:
                hit = index == position
                index += 1
            else:
                hit = arg.keyword.value == keyword or arg.keyword.value in self.table.keywords
            if hit and _mentions_nccl(arg.value):
                label = f"`{arg.keyword.value}=`" if arg.keyword else "the backend argument"
                new = self._swap(orig.value, arg.value, label)
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    changed = True
        return updated_node.with_changes(args=args) if changed else updated_node

    def _argparse(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        flags = [a.value.raw_value for a in original.args
                 if (a.keyword is None or a.keyword.value == "dest") and isinstance(a.value, cst.SimpleString)]
        if not any(word in flag.lower() for flag in flags for word in self.table.names):
            return updated
        args = list(updated.args)
        changed = False
        for i, (orig, arg) in enumerate(zip(original.args, updated.args)):
            if arg.keyword is not None and arg.keyword.value in ("default", "choices", "const") \
                    and _mentions_nccl(arg.value):
                new = self._swap(orig.value, arg.value, f"`{arg.keyword.value}=` of a backend option")
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    changed = True
        return updated.with_changes(args=args) if changed else updated

    def leave_Comparison(self, original_node: cst.Comparison,
                         updated_node: cst.Comparison) -> cst.BaseExpression:
        if len(updated_node.comparisons) != 1 or len(original_node.comparisons) != 1:
            return updated_node
        target = updated_node.comparisons[0]
        if not isinstance(target.operator, _COMPARE):
            return updated_node
        original_right = original_node.comparisons[0].comparator
        if self._backend_names(original_node.left) and _mentions_nccl(target.comparator):
            new = self._swap(original_right, target.comparator, "a backend comparison")
            if new is not target.comparator:
                return updated_node.with_changes(comparisons=[target.with_changes(comparator=new)])
        elif self._backend_names(original_right) and _mentions_nccl(updated_node.left):
            new = self._swap(original_node.left, updated_node.left, "a backend comparison")
            if new is not updated_node.left:
                return updated_node.with_changes(left=new)
        return updated_node


    # -- names that hold a backend: `backend = "nccl"`, `def f(backend="nccl")`, {"backend": ...}
    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if not _mentions_nccl(updated_node.value) or not all(
                self._backend_names(t.target) for t in original_node.targets):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, "an assignment to a backend name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_AnnAssign(self, original_node: cst.AnnAssign,
                        updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if (updated_node.value is None or original_node.value is None
                or not _mentions_nccl(updated_node.value) or not self._backend_names(original_node.target)):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, "an assignment to a backend name")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if (updated_node.default is None or original_node.default is None
                or not _mentions_nccl(updated_node.default) or not self._backend_names(updated_node.name)):
            return updated_node
        value = self._swap(original_node.default, updated_node.default, "a backend parameter default")
        return updated_node.with_changes(default=value) if value is not updated_node.default else updated_node

    def leave_DictElement(self, original_node: cst.DictElement,
                          updated_node: cst.DictElement) -> cst.DictElement:
        key = updated_node.key
        if not (isinstance(key, cst.SimpleString) and _mentions_nccl(updated_node.value)
                and any(word in key.raw_value.lower() for word in self.table.names)):
            return updated_node
        value = self._swap(original_node.value, updated_node.value, f"the `{key.raw_value}` entry")
        return updated_node.with_changes(value=value) if value is not updated_node.value else updated_node


class NcclBackendConstant(_DistRule):
    code = "NPU141"
    name = "nccl-backend-constant"
    summary = "`Backend.NCCL` becomes `Backend.HCCL` (defined when torch_npu registers hccl)"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "NCCL":
            return updated_node
        qualified = self.resolve(original_node)
        new = self.table.constants.get(qualified or "")
        if new is None:
            return updated_node
        new_node = updated_node.with_changes(attr=cst.Name(new))
        self.fixed(original_node, f"`{code_of(original_node)}` → `{code_of(new_node)}`")
        return new_node


class IsNcclAvailable(_DistRule):
    code = "NPU142"
    name = "is-nccl-available"
    summary = "`torch.distributed.is_nccl_available` becomes `is_hccl_available`"

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if updated_node.attr.value != "is_nccl_available":
            return updated_node
        new = self.table.renames.get(self.resolve(original_node) or "")
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        return updated_node.with_changes(attr=cst.Name(new))

    def leave_ImportAlias(self, original_node: cst.ImportAlias,
                          updated_node: cst.ImportAlias) -> cst.ImportAlias:
        # `from torch.distributed import is_nccl_available [as x]`: keep the local name working
        if not (isinstance(updated_node.name, cst.Name) and updated_node.name.value == "is_nccl_available"):
            return updated_node
        local = (updated_node.asname.name.value if updated_node.asname is not None
                 and isinstance(updated_node.asname.name, cst.Name) else "is_nccl_available")
        new = self.table.renames.get(self.context.facts.aliases.get(local, ""))
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        if local == "is_nccl_available":
            return updated_node.with_changes(name=cst.Name(new), asname=None)
        return updated_node.with_changes(name=cst.Name(new))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        # the bare uses of `from torch.distributed import is_nccl_available`
        if updated_node.value != "is_nccl_available" or self.context.in_import or original_node in self.tree.nodes("attrs"):
            return updated_node
        new = self.table.renames.get(self.context.facts.aliases.get("is_nccl_available", ""))
        if new is None:
            return updated_node
        self.fixed(original_node, f"`is_nccl_available` → `{new}`")
        return updated_node.with_changes(value=new)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "is_nccl_available":  # `x.is_nccl_available`: the attribute's own Name
            self.tree.nodes("attrs").add(node.attr)



class ProcessGroupNccl(_DistRule):
    code = "NPU143"
    name = "process-group-nccl"
    summary = "`ProcessGroupNCCL` is reported: torch_npu's class is `ProcessGroupHCCL`"
    fix = Fix.NONE
    needs_torch_npu = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "ProcessGroupNCCL":
            self.tree.nodes("attrs").add(node.attr)
            self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "ProcessGroupNCCL" and node not in self.tree.nodes("attrs"):
            self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        qualified = self.resolve(node)
        if qualified in self.table.flags:
            self.report(node, f"`{qualified}` does not exist on NPU: {self.table.flags[qualified]}")

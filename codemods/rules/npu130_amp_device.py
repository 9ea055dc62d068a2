"""NPU130: every CUDA AMP spelling becomes the device-generic `torch.amp` API with "npu".

    torch.cuda.amp.autocast(True, torch.bfloat16) -> torch.amp.autocast("npu", enabled=True, dtype=torch.bfloat16)
    torch.cuda.amp.GradScaler(init_scale=1024)    -> torch.amp.GradScaler("npu", init_scale=1024)
    @torch.cuda.amp.custom_fwd                     -> @torch.amp.custom_fwd(device_type="npu")
    torch.autocast("cuda") / device_type="cuda"   -> "npu"
    torch.amp.GradScaler()  (a CUDA scaler)        -> torch.amp.GradScaler("npu")

Names imported from `torch.cuda.amp` (or the module itself, `from torch.cuda import amp`) are
moved to `torch.amp` only when every use of them in the file is a call (or a custom_fwd /
custom_bwd decorator), since each call must gain the device; otherwise the import and its uses
are left alone and reported. The mapping is data: `codemods/data/amp.json`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import libcst as cst

from codemods.analyses.devices import device_expr, mentions_cuda
from codemods.analyses.portable import device_type, portable_ok
from codemods.analyses.references import qualified_references
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, LineSpan, Rule, RuleContext
from codemods.data.tables import load_data
from codemods.model.cstnodes import alias_local, code_of, dotted_name, keyword, split_import
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Severity

DATA = "amp.json"
CUDA_AMP = "torch.cuda.amp"
PREFILTER = r"autocast|GradScaler|custom_[fb]wd|\bamp\b"


@dataclass(frozen=True)
class AmpTable:
    cuda_amp: dict[str, dict[str, Any]]  # bare name (autocast) -> spec
    generic: dict[str, dict[str, Any]]  # qualified name -> spec
    legacy: dict[str, str]  # torch.get_autocast_gpu_dtype -> get_autocast_dtype
    device: str


# torch.cuda.amp names outside the table, with what to write on the NPU
_AMP_OTHER = {"amp_definitely_not_available": "`torch.cuda.amp.common.amp_definitely_not_available()` is True "
                                              "without CUDA; on the NPU test `not torch.npu.is_available()`",
              "common": "`torch.cuda.amp.common` holds `amp_definitely_not_available()`: on the NPU test "
                        "`not torch.npu.is_available()`"}


@cache
def amp_table() -> AmpTable:
    data = load_data(DATA)
    cuda_amp = {k.removeprefix(CUDA_AMP + "."): v for k, v in data["cuda_amp"].items()}
    return AmpTable(cuda_amp, data["generic"], data.get("legacy_gpu", {}), data["device"])


def _npu_string(device: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{device}"')


def _device_of(rule: Rule, device: str) -> cst.BaseExpression:
    """The AMP device: "npu", or under --target portable the portable device's type."""
    if rule.target == "portable":  # no DEVICE (bound by the file, torch < 2.6): the CUDA device stays
        generic = device_type(rule.context) if portable_ok(rule.context.options) else None
        return generic or _npu_string("cuda")
    return _npu_string(device)


class AmpUses:
    """Which local names bound to torch.cuda.amp (or its members) can move to torch.amp: every
    use must be a call or, for custom_fwd/custom_bwd, a decorator (we add the device there)."""

    def __init__(self, model: FileModel, aliases: dict[str, str], names: dict[str, Any]) -> None:
        self.members = {local: target.rsplit(".", 1)[1] for local, target in aliases.items()
                        if target.startswith(CUDA_AMP + ".") and target.count(".") == 3}
        self.modules = {local for local, target in aliases.items() if target == CUDA_AMP}
        self.blocked: dict[str, str] = {}
        for local in self.members:
            if not re.search(PREFILTER, local):  # `autocast as ac`: `ac(...)` lines are never parsed
                self.blocked[local] = f"the alias `{local}`, which the migration cannot follow"
        if self.members or self.modules:
            self._scan(model, names)

    def _scan(self, model: FileModel, names: dict[str, Any]) -> None:
        allowed: set[int] = set()  # ids of name/attribute nodes used as a callee or decorator
        for node in model.of_type(ast.Call, ast.FunctionDef, ast.AsyncFunctionDef):  # the shared walk
            if isinstance(node, ast.Call):
                star = any(isinstance(a, ast.Starred) for a in node.args)
                if not (star and self._member_of(node.func) == "autocast"):
                    allowed.add(id(node.func))  # `*args` hides which autocast argument is which
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                allowed.update(id(d) for d in node.decorator_list
                               if self._member_of(d) in ("custom_fwd", "custom_bwd"))
        owners: set[int] = set()
        for node in model.of_type(ast.Attribute):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in self.modules:
                owners.add(id(node.value))
                if node.attr not in names or id(node) not in allowed:
                    self.blocked.setdefault(node.value.id, f"`{node.value.id}.{node.attr}` at line "
                                                           f"{node.lineno}")
        for node in model.of_type(ast.Name):
            if isinstance(node, ast.Name) and id(node) not in owners and id(node) not in allowed:
                if node.id in self.members or node.id in self.modules:
                    self.blocked.setdefault(node.id, f"`{node.id}` at line {node.lineno}")

    def _member_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.members.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in self.modules:
            return node.attr
        return None


class AmpDevice(Rule):
    """## What it does

    CUDA AMP (`torch.cuda.amp.*`, `torch.autocast("cuda")`, ...) becomes `torch.amp.*("npu")`

    ## Why

    AMP has several CUDA spellings, and `transfer_to_npu` covers only some of them: it swaps the
    classes of `torch.cuda.amp` and rewrites `autocast("cuda")`, but not `torch.amp.GradScaler("cuda")`,
    `torch.GradScaler(device="cuda")` or `custom_fwd(device_type="cuda")` (fact sheet §1.6), and a
    `GradScaler()` without a device is a CUDA scaler. This rule writes all of them in one form, the
    device-generic `torch.amp` API with the device `"npu"` (docs/rules-core.md says why):

    | CUDA | NPU |
    |---|---|
    | `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)` | `torch.amp.autocast("npu", enabled=..., dtype=..., cache_enabled=...)` |
    | `torch.cuda.amp.GradScaler(...)` | `torch.amp.GradScaler("npu", ...)` |
    | `@torch.cuda.amp.custom_fwd` / `custom_fwd(cast_inputs=...)` | `@torch.amp.custom_fwd(device_type="npu")` / `(cast_inputs=..., device_type="npu")` |
    | `@torch.cuda.amp.custom_bwd` | `@torch.amp.custom_bwd(device_type="npu")` |
    | `torch.autocast("cuda")`, `torch.amp.autocast(device_type="cuda")` | `"npu"` |
    | `torch.amp.GradScaler("cuda")`, `torch.GradScaler(device="cuda")`, `torch.amp.GradScaler()` | `"npu"` |
    | `torch.is_autocast_enabled()`, `torch.get_autocast_gpu_dtype()`, `torch.set_autocast_gpu_dtype(d)` | `torch.is_autocast_enabled("npu")`, `torch.get_autocast_dtype("npu")`, `torch.set_autocast_dtype("npu", d)` |

    Positional arguments of `torch.cuda.amp.autocast` become keywords, because `torch.amp.autocast`
    orders them differently; `GradScaler`'s keep their order after the device.

    Imported names move with their calls: `from torch.cuda.amp import autocast, GradScaler` becomes
    `from torch.amp import ...` and every call gains `"npu"`; `from torch.cuda import amp` becomes
    `from torch import amp`. That is done only when every use of the name in the file is a call (or a
    `custom_fwd`/`custom_bwd` decorator) the rule can see. A name passed around without a call
    (`ctx = autocast if amp else nullcontext`), an alias the rule cannot follow
    (`autocast as ac`), `*args` in an autocast call, or a spelled-out `torch.cuda.amp.autocast` that is
    not called is reported and left alone. The mapping is data: `codemods/data/amp.json`.

    ## Example

    ```python
    # before
    from torch.cuda.amp import autocast, GradScaler
    scaler = GradScaler()
    with autocast(dtype=torch.bfloat16):
        loss = model(x)
    # after
    from torch.amp import autocast, GradScaler
    scaler = GradScaler("npu")
    with autocast("npu", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Fix safety

    Safe: the default dtype is float16 for both the CUDA class and the `npu` device, and
    `cache_enabled` defaults to True in both. `torch.amp.GradScaler("npu")` uses the
    `_amp_foreach_non_finite_check_and_unscale_` and `_amp_update_scale_` kernels, which torch_npu
    registers (not on Ascend 950DT for the latter, fact sheet §2.3).
    Suppress with `# npu-migrate: ignore[NPU130]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the same device-generic `torch.amp` calls with the device `DEVICE.type` (docs/targets.md)
    """

    code = "NPU130"
    name = "amp-device"
    supported_targets = frozenset({"npu", "portable"})
    summary = "CUDA AMP (`torch.cuda.amp.*`, `torch.autocast(\"cuda\")`, ...) becomes `torch.amp.*(\"npu\")`"
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = PREFILTER
    needs_torch_npu = True

    def _advised_device(self) -> str:
        """The AMP device named in advice: "npu", or `DEVICE.type` under --target portable."""
        return "`DEVICE.type`" if self.target == "portable" else f"\"{self.table.device}\""

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.table = amp_table()
        self._uses: AmpUses | None = None
        self._reported: set[str] = set()
        self._tails = frozenset(name.rsplit(".", 1)[1] for name in [*self.table.generic, *self.table.legacy])

    def target_lines(self) -> list[LineSpan] | None:
        """The chains that resolve into `torch.cuda.amp` or to a name of the table (every call,
        decorator and attribute the rule acts on is one), and the imports it moves."""
        table = self.table
        found = self.context.model.derived(qualified_references).lines(
            lambda name: (name.startswith(CUDA_AMP) and name[len(CUDA_AMP):len(CUDA_AMP) + 1] in ("", "."))
            or name in table.generic or name in table.legacy)
        if found is None:
            return None
        model = self.context.model
        return found + [(node.lineno, node.end_lineno or node.lineno) for node in model.of_type(ast.Import)
                        if isinstance(node, ast.Import) and any(a.name == CUDA_AMP for a in node.names)] \
            + [(node.lineno, node.end_lineno or node.lineno) for node in model.of_type(ast.ImportFrom)
               if isinstance(node, ast.ImportFrom) and not node.level and node.module in (CUDA_AMP, "torch.cuda")]

    @property
    def uses(self) -> AmpUses:
        if self._uses is None:
            self._uses = AmpUses(self.context.model, self.context.facts.aliases,
                                 self.table.cuda_amp)
        return self._uses

    # -- which CUDA AMP member a callee names, and how to spell its torch.amp form ------------
    def _cuda_member(self, func: cst.BaseExpression) -> tuple[str, str, cst.BaseExpression | None] | None:
        """For a torch.cuda.amp callee: (member, how, new callee). `how` is "keep" (the import
        moves instead: `autocast`, `amp.autocast`), "replace" (`torch.cuda.amp.X` becomes
        `torch.amp.X`), "blocked" (the import cannot move; reported there) or "unspellable"."""
        qualified = self.resolve(func)
        if not qualified or not qualified.startswith(CUDA_AMP + "."):
            return None
        member = qualified.removeprefix(CUDA_AMP + ".")
        if member not in self.table.cuda_amp:
            return None
        target = self.table.cuda_amp[member]["target"]
        if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            local = func.value if isinstance(func, cst.Name) else dotted_name(func.value) or ""
            if local in self.uses.blocked or (isinstance(func, cst.Name) and target != member):
                return member, "blocked", None
            return member, "keep", None
        assert isinstance(func, cst.Attribute)
        owner = func.value
        # X.cuda.amp.autocast with X bound to torch: drop the `.cuda` link
        if (isinstance(owner, cst.Attribute) and isinstance(owner.value, cst.Attribute)
                and owner.value.attr.value == "cuda" and self.resolve(owner.value.value) == "torch"):
            torch_expr = owner.value.value
            return member, "replace", func.with_changes(value=owner.with_changes(value=torch_expr),
                                                        attr=cst.Name(target))
        return member, "unspellable", None

    def visit_Call(self, node: cst.Call) -> None:
        self.tree.nodes("callees").add(node.func)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.tree.nodes("callees").add(node.decorator)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """A `torch.cuda.amp.X` spelled out but not called: we cannot add the device to it. The
        module itself used as a value, or a member torch.amp lacks, is reported."""
        if self.context.in_import:
            return
        owned = self.tree.nodes("amp_owners")  # `torch.cuda.amp` inside a longer chain
        if isinstance(node.value, cst.Attribute):
            owned.add(node.value)
        qualified = self.resolve(node)
        if qualified == CUDA_AMP and node not in owned and not isinstance(node.value, cst.Name):
            self.report(node, "`torch.cuda.amp` used as a module: its NPU form is `torch.amp`, whose members take "
                              f"the device type (`torch.amp.autocast({self._advised_device()})`, "
                              f"`torch.amp.GradScaler({self._advised_device()})`); `torch.npu.amp` also has "
                              "autocast and GradScaler")
            return
        if qualified == f"{CUDA_AMP}.{node.attr.value}" and node.attr.value not in self.table.cuda_amp \
                and not isinstance(node.value, cst.Name):
            self.report(node, f"`{code_of(node)}`: no torch.amp counterpart; " + _AMP_OTHER.get(
                node.attr.value, "port it by hand with torch.amp and the device \"npu\""))
            return
        if node in self.tree.nodes("callees") or node.attr.value not in self.table.cuda_amp:
            return
        if self.resolve(node) == f"{CUDA_AMP}.{node.attr.value}" and not isinstance(node.value, cst.Name):
            self.report(node, f"`{code_of(node)}` is used without being called; write "
                              f"`torch.amp.{self.table.cuda_amp[node.attr.value]['target']}` with the "
                              f"device {self._advised_device()} by hand")

    # -- calls -----------------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else None)
        if tail is None:
            return updated_node
        if tail in self.table.cuda_amp or tail in self.uses.members:
            found = self._cuda_member(func)
            if found is not None:
                return self._from_cuda_amp(original_node, updated_node, *found)
        if tail not in self._tails:
            return updated_node
        qualified = self.resolve(func)
        if qualified in self.table.generic:
            return self._generic(original_node, updated_node, qualified, self.table.generic[qualified])
        if qualified in self.table.legacy:
            return self._legacy(original_node, updated_node, qualified)
        return updated_node

    def _from_cuda_amp(self, original: cst.Call, updated: cst.Call, member: str, how: str,
                       new_func: cst.BaseExpression | None) -> cst.BaseExpression:
        spec = self.table.cuda_amp[member]
        target = spec["target"]
        if how == "unspellable":
            self.report(original, f"`{code_of(original.func)}` cannot be spelled as torch.amp here; "
                                  f"write `torch.amp.{target}(...)` with \"{self.table.device}\"")
        if how in ("unspellable", "blocked"):
            return updated  # blocked imports are reported once, at the import
        args = list(updated.args)
        if spec["positional"]:
            if any(a.star == "*" for a in args):
                self.report(original, f"`{code_of(original.func)}(*...)`: cannot tell which argument is "
                                      "which; port this call by hand")
                return updated
            names = spec["positional"]
            positional = [a for a in args if a.keyword is None and not a.star]
            if len(positional) > len(names):
                return updated  # a TypeError on CUDA already; leave it
            for i, arg in enumerate(positional):
                args[args.index(arg)] = arg.with_changes(
                    keyword=cst.Name(names[i]), equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace("")))
        device = _device_of(self, self.table.device)
        if spec["device"] == "positional":
            args.insert(0, cst.Arg(device, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                                   if args else cst.MaybeSentinel.DEFAULT))
        else:
            args = _append_keyword(args, "device_type", device)
        new_call = updated.with_changes(func=new_func or updated.func, args=args)
        self.fixed(original, f"`{code_of(original.func)}(...)` → `{code_of(new_call.func)}"
                             f"(\"{self.table.device}\", ...)`" if spec["device"] == "positional" else
                   f"`{code_of(original.func)}` → `{code_of(new_call.func)}(device_type=\"npu\")`")
        return new_call

    def _generic(self, original: cst.Call, updated: cst.Call, qualified: str,
                 spec: dict[str, Any]) -> cst.BaseExpression:
        args = list(updated.args)
        position, keyword = spec["position"], spec["keyword"]
        slot = None
        positional = [i for i, a in enumerate(args) if a.keyword is None and not a.star]
        if any(a.star == "*" for a in args):
            return updated
        if position is not None and len(positional) > position:
            slot = positional[position]
        for i, arg in enumerate(args):
            if arg.keyword is not None and arg.keyword.value == keyword:
                slot = i
        if slot is None:
            if not spec["cuda_when_missing"] or any(a.star == "**" for a in args):
                return updated
            args.insert(0, cst.Arg(_device_of(self, self.table.device),
                                   comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                                   if args else cst.MaybeSentinel.DEFAULT))
            self.fixed(original, f"`{code_of(original.func)}()` without a device means CUDA: "
                                 f"added \"{self.table.device}\"")
            return updated.with_changes(args=args)
        value = args[slot].value
        if not mentions_cuda(value):
            return updated
        new = _device_of(self, "cuda") if self.target == "portable" else device_expr(value)
        if new is None:
            self.report(original, f"`{code_of(value)}`: not a plain CUDA device string; set the AMP "
                                  f"device to {self._advised_device()} by hand")
            return updated
        self.fixed(original, f"`{code_of(value)}` → `{code_of(new)}` (AMP device of `{qualified}`)")
        args[slot] = args[slot].with_changes(value=new)
        return updated.with_changes(args=args)

    def _legacy(self, original: cst.Call, updated: cst.Call, qualified: str) -> cst.BaseExpression:
        """torch.get_autocast_gpu_dtype() -> torch.get_autocast_dtype("npu")."""
        func = updated.func
        new_name = self.table.legacy[qualified]
        if not isinstance(func, cst.Attribute) or any(a.star for a in updated.args):
            self.report(original, f"`{qualified}` is CUDA-only: use `torch.{new_name}(\"npu\", ...)`")
            return updated
        args = list(updated.args)
        args.insert(0, cst.Arg(_device_of(self, self.table.device),
                               comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                               if args else cst.MaybeSentinel.DEFAULT))
        new_call = updated.with_changes(func=func.with_changes(attr=cst.Name(new_name)), args=args)
        self.fixed(original, f"`{qualified}(...)` → `torch.{new_name}(\"{self.table.device}\", ...)`")
        return new_call

    # -- bare decorators: @torch.cuda.amp.custom_fwd ---------------------------------------------
    def leave_Decorator(self, original_node: cst.Decorator,
                        updated_node: cst.Decorator) -> cst.Decorator:
        deco = original_node.decorator
        if isinstance(deco, cst.Call):
            return updated_node
        tail = deco.attr.value if isinstance(deco, cst.Attribute) else (
            deco.value if isinstance(deco, cst.Name) else None)
        if tail not in ("custom_fwd", "custom_bwd") and self.uses.members.get(tail or "") not in (
                "custom_fwd", "custom_bwd"):
            return updated_node
        found = self._cuda_member(deco)
        if found is None:
            return updated_node
        member, how, new_func = found
        if how not in ("keep", "replace"):
            if how == "unspellable":
                self.report(original_node, f"`@{code_of(deco)}` cannot be spelled as torch.amp here; "
                                           f"write `@torch.amp.{member}(device_type=\"npu\")`")
            return updated_node
        call = cst.Call(func=new_func or updated_node.decorator,
                        args=[cst.Arg(_device_of(self, self.table.device), keyword=cst.Name("device_type"),
                                      equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                            whitespace_after=cst.SimpleWhitespace("")))])
        self.fixed(original_node, f"`@{code_of(deco)}` → `@{code_of(call)}`")
        return updated_node.with_changes(decorator=call)

    # -- imports -----------------------------------------------------------------------------
    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        names = list(updated_node.names)
        changed = False
        for i, alias in enumerate(updated_node.names):
            if alias.asname is None or dotted_name(alias.name) != CUDA_AMP:
                continue
            local = alias.asname.name
            if not isinstance(local, cst.Name) or not self._movable(original_node, local.value):
                continue
            names[i] = alias.with_changes(name=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("amp")))
            self.fixed(original_node, f"`import torch.cuda.amp as {local.value}` → `import torch.amp as "
                                      f"{local.value}`")
            changed = True
        return updated_node.with_changes(names=names) if changed else updated_node

    def leave_ImportFrom(self, original_node: cst.ImportFrom,
                         updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if updated_node.relative or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        if dotted_name(updated_node.module) != CUDA_AMP:
            return updated_node
        locals_ = [(dotted_name(a.name), alias_local(a)) for a in updated_node.names]
        if not all(name in self.table.cuda_amp for name, _ in locals_):
            others = ", ".join(n or "?" for n, _ in locals_ if n not in self.table.cuda_amp)
            self.report(original_node, f"`from torch.cuda.amp import {others}`: no torch.amp "
                                       "counterpart known; port by hand")
            return updated_node
        if not all(self._movable(original_node, local) for _, local in locals_):
            return updated_node
        if any(self.table.cuda_amp[n or ""]["target"] != n for n, _ in locals_):
            return updated_node
        self.fixed(original_node, "`from torch.cuda.amp import ...` → `from torch.amp import ...`")
        return updated_node.with_changes(
            module=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("amp")))

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """`from torch.cuda import amp[, other]` -> `from torch import amp[; from torch.cuda import other]`."""
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for stmt in updated_node.body:
            if not (isinstance(stmt, cst.ImportFrom) and not stmt.relative
                    and not isinstance(stmt.names, cst.ImportStar)
                    and dotted_name(stmt.module) == "torch.cuda"):
                body.append(stmt)
                continue
            amp = [a for a in stmt.names if dotted_name(a.name) == "amp"
                   and self._movable(original_node, alias_local(a))]
            if not amp:
                body.append(stmt)
                continue
            rest = [a for a in stmt.names if a not in amp]
            if not rest:
                body.append(stmt.with_changes(module=cst.Name("torch")))
            else:
                split = split_import(stmt, amp, cst.Name("torch"), rest)
                if split is None:
                    self.report(original_node, "`amp` should come from `torch`, but the other names of "
                                               "this import carry comments: split the import by hand")
                    body.append(stmt)
                    continue
                body.extend(split)
            self.fixed(original_node, "`from torch.cuda import amp` → `from torch import amp`")
            changed = True
        return updated_node.with_changes(body=body) if changed else updated_node

    def _movable(self, node: cst.CSTNode, local: str) -> bool:
        if self.context.facts.aliases.get(local, "").rpartition(".")[0] not in (CUDA_AMP, "torch.cuda"):
            return False
        why = self.uses.blocked.get(local)
        if why is None:
            return True
        if local not in self._reported:
            self._reported.add(local)
            self.report(node, f"`{local}` (torch.cuda.amp) is used other than by calling it ({why}); "
                              f"it stays CUDA: use `torch.amp.*` with the device \"{self.table.device}\" "
                              "by hand")
        return False


def _append_keyword(args: list[cst.Arg], name: str, value: cst.BaseExpression) -> list[cst.Arg]:
    new = keyword(name, value)
    if not args:
        return [new]
    last = args[-1]
    if last.comma is cst.MaybeSentinel.DEFAULT:
        return [*args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), new]
    return [*args, new.with_changes(comma=last.comma)]  # a trailing comma stays trailing


CASES = [
    Invalid(
        """\
import torch
scaler = torch.cuda.amp.GradScaler(enabled=True)
with torch.cuda.amp.autocast(dtype=torch.bfloat16):
    pass
""",
        after="""\
import torch
DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
scaler = torch.amp.GradScaler(DEVICE.type, enabled=True)
with torch.amp.autocast(DEVICE.type, dtype=torch.bfloat16):
    pass
""",
        codes=("NPU100", "NPU130"),
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
from torch.cuda.amp import autocast, GradScaler
scaler = GradScaler()
with autocast(dtype=torch.bfloat16):
    loss = model(x)
""",
        after="""\
import os
import torch
from torch.amp import autocast, GradScaler
scaler = GradScaler("npu")
with autocast("npu", dtype=torch.bfloat16):
    loss = model(x)
""",
    ),
    Valid(
        """\
import os
import torch
from torch.amp import autocast, GradScaler
scaler = GradScaler("npu")
with autocast("npu", dtype=torch.bfloat16):
    loss = model(x)
""",
    ),
    Invalid(
        """\
import torch
with torch.cuda.amp.autocast():
    pass
""",
        after="""\
import torch
with torch.amp.autocast("npu"):
    pass
""",
    ),
    Invalid(
        """\
import torch
with torch.cuda.amp.autocast(True, torch.bfloat16):
    pass
""",
        after="""\
import torch
with torch.amp.autocast("npu", enabled=True, dtype=torch.bfloat16):
    pass
""",
    ),
    Invalid(
        """\
import torch
with torch.cuda.amp.autocast(enabled=use_amp, dtype=dt):
    pass
""",
        after="""\
import torch
with torch.amp.autocast("npu", enabled=use_amp, dtype=dt):
    pass
""",
    ),
    Invalid(
        """\
import torch as th
ctx = th.cuda.amp.autocast(**opts)
""",
        after="""\
import torch as th
ctx = th.amp.autocast("npu", **opts)
""",
    ),
    Invalid(
        """\
import torch
s = torch.cuda.amp.GradScaler()
""",
        after="""\
import torch
s = torch.amp.GradScaler("npu")
""",
    ),
    Invalid(
        """\
import torch
s = torch.cuda.amp.GradScaler(2.0 ** 10, 2.0, enabled=amp)
""",
        after="""\
import torch
s = torch.amp.GradScaler("npu", 2.0 ** 10, 2.0, enabled=amp)
""",
    ),
    Invalid(
        """\
import torch
s = torch.cuda.amp.GradScaler(
    init_scale=1024,  # small
)
""",
        after="""\
import torch
s = torch.amp.GradScaler(
    "npu", init_scale=1024,  # small
)
""",
    ),
    Invalid(
        """\
import torch
@torch.cuda.amp.custom_fwd
def f(ctx, x):
    return x
""",
        after="""\
import torch
@torch.amp.custom_fwd(device_type="npu")
def f(ctx, x):
    return x
""",
    ),
    Invalid(
        """\
import torch
@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
def f(ctx, x):
    return x
""",
        after="""\
import torch
@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="npu")
def f(ctx, x):
    return x
""",
    ),
    Invalid(
        """\
import torch
@torch.cuda.amp.custom_bwd
def b(ctx, g):
    return g
""",
        after="""\
import torch
@torch.amp.custom_bwd(device_type="npu")
def b(ctx, g):
    return g
""",
    ),
    Invalid(
        """\
import torch
fwd = torch.cuda.amp.custom_fwd(forward)
""",
        after="""\
import torch
fwd = torch.amp.custom_fwd(forward, device_type="npu")
""",
    ),
    Invalid(
        """\
from torch.cuda.amp import autocast, GradScaler
scaler = GradScaler()
with autocast():
    pass
""",
        after="""\
from torch.amp import autocast, GradScaler
scaler = GradScaler("npu")
with autocast("npu"):
    pass
""",
    ),
    Invalid(
        """\
from torch.cuda.amp import autocast as amp_autocast
with amp_autocast(dtype=d):
    pass
""",
        after="""\
from torch.amp import autocast as amp_autocast
with amp_autocast("npu", dtype=d):
    pass
""",
    ),
    Invalid(
        """\
from torch.cuda.amp import custom_fwd as my_custom_fwd
@my_custom_fwd
def f(ctx):
    pass
""",
        after="""\
from torch.amp import custom_fwd as my_custom_fwd
@my_custom_fwd(device_type="npu")
def f(ctx):
    pass
""",
    ),
    Invalid(
        """\
from torch.cuda.amp import custom_fwd
@custom_fwd
def f(ctx):
    pass
""",
        after="""\
from torch.amp import custom_fwd
@custom_fwd(device_type="npu")
def f(ctx):
    pass
""",
    ),
    Invalid(
        """\
from torch.cuda import amp
with amp.autocast(enabled=False):
    pass
""",
        after="""\
from torch import amp
with amp.autocast("npu", enabled=False):
    pass
""",
    ),
    Invalid(
        """\
import torch.cuda.amp as amp
s = amp.GradScaler()
""",
        after="""\
import torch.amp as amp
s = amp.GradScaler("npu")
""",
    ),
    Invalid(
        """\
from torch.cuda import amp, synchronize
s = amp.GradScaler()
""",
        after="""\
from torch.cuda import synchronize; from torch import amp
s = amp.GradScaler("npu")
""",
    ),
    Invalid(
        """\
import torch
with torch.autocast("cuda"):
    pass
""",
        after="""\
import torch
with torch.autocast("npu"):
    pass
""",
    ),
    Invalid(
        """\
import torch
with torch.autocast(device_type='cuda', dtype=torch.bfloat16):
    pass
""",
        after="""\
import torch
with torch.autocast(device_type='npu', dtype=torch.bfloat16):
    pass
""",
    ),
    Invalid(
        """\
import torch
with torch.amp.autocast(device_type="cuda"):
    pass
""",
        after="""\
import torch
with torch.amp.autocast(device_type="npu"):
    pass
""",
    ),
    Invalid(
        """\
import torch
with torch.autocast("cuda" if torch.cuda.is_available() else "cpu"):
    pass
""",
        after="""\
import torch
with torch.autocast("npu" if torch.cuda.is_available() else "cpu"):
    pass
""",
    ),
    Invalid(
        """\
from torch import autocast
with autocast('cuda'):
    pass
""",
        after="""\
from torch import autocast
with autocast('npu'):
    pass
""",
    ),
    Invalid(
        """\
import torch
s = torch.amp.GradScaler("cuda")
""",
        after="""\
import torch
s = torch.amp.GradScaler("npu")
""",
    ),
    Invalid(
        """\
import torch
s = torch.GradScaler(device="cuda", init_scale=8)
""",
        after="""\
import torch
s = torch.GradScaler(device="npu", init_scale=8)
""",
    ),
    Invalid(
        """\
import torch
s = torch.amp.GradScaler()
""",
        after="""\
import torch
s = torch.amp.GradScaler("npu")
""",
    ),
    Invalid(
        """\
import torch
s = torch.GradScaler(enabled=True)
""",
        after="""\
import torch
s = torch.GradScaler("npu", enabled=True)
""",
    ),
    Invalid(
        """\
import torch
@torch.amp.custom_fwd(device_type="cuda")
def f(ctx):
    pass
""",
        after="""\
import torch
@torch.amp.custom_fwd(device_type="npu")
def f(ctx):
    pass
""",
    ),
    Invalid(
        """\
import torch
on = torch.is_autocast_enabled()
""",
        after="""\
import torch
on = torch.is_autocast_enabled("npu")
""",
    ),
    Invalid(
        """\
import torch
d = torch.get_autocast_dtype("cuda")
""",
        after="""\
import torch
d = torch.get_autocast_dtype("npu")
""",
    ),
    Invalid(
        """\
import torch
d = torch.get_autocast_gpu_dtype()
""",
        after="""\
import torch
d = torch.get_autocast_dtype("npu")
""",
    ),
    Invalid(
        """\
import torch
torch.set_autocast_gpu_dtype(torch.bfloat16)
""",
        after="""\
import torch
torch.set_autocast_dtype("npu", torch.bfloat16)
""",
    ),
    Valid(
        """\
import torch
with torch.autocast("cpu"):
    pass
""",
    ),
    Valid(
        """\
import torch
with torch.autocast(device_type=device.type):
    pass
""",
    ),
    Valid(
        """\
import torch
s = torch.amp.GradScaler("npu")
""",
    ),
    Valid(
        """\
import torch
with torch.cpu.amp.autocast():
    pass
""",
    ),
    Valid(
        """\
import torch
on = torch.is_autocast_enabled("cpu")
""",
    ),
    Valid(
        """\
from apex import amp
model, opt = amp.initialize(model, opt)
""",
    ),
    Valid(
        """\
def autocast():
    pass
with autocast():
    pass
""",
    ),
    Valid(
        """\
print("use torch.cuda.amp.autocast")
""",
    ),
    Valid(
        """\
import torch
s = torch.amp.GradScaler(**kwargs)
""",
    ),
]

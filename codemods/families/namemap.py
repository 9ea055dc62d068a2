"""Shared machinery of the data-driven coverage rules (NPU150-NPU199): a rule that maps qualified API names (`torch.backends.cudnn.allow_tf32`) to their
NPU equivalents or flags them.

A `NameMapRule` works on the *maximal* Name/Attribute chain of an expression: `th.cuda.nvtx.mark`
is looked up once, as `torch.cuda.nvtx.mark`, never as `th.cuda` or `th.cuda.nvtx` too. Where a
name reaches the file through `from torch.cuda import nvtx` or `import torch.cuda.nvtx as nvtx`,
the import is rewritten (keeping the local name), so every use in the file stays valid without
touching it; where it is reached from `torch`, the use itself is rewritten.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import libcst as cst

from codemods.analyses.references import qualified_references
from codemods.api.rule import LineSpan, Rule
from codemods.api.targets import npu_too_new
from codemods.data.tables import load_data
from codemods.model.cstnodes import alias_asname, dotted_expr, dotted_name, dotted_parts
from npu_migrate.core.diagnostics import Severity


def entries_for(name: str, code: str) -> list[dict[str, Any]]:
    return [e for e in load_data(name)["entries"] if e.get("code") == code]


@dataclass(frozen=True)
class NameEntry:
    cuda: str
    npu: str | None
    action: str  # "rewrite" | "flag" | "none"
    message: str | None
    severity: Severity
    members: str  # rewrite entries: "same" (members keep their name) or "flag" (unknown members)
    kept_members: frozenset[str] = frozenset()  # with "flag": members the NPU name has too

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> NameEntry:
        return cls(raw["cuda"], raw.get("npu"), raw["action"], raw.get("message"),
                   Severity(raw.get("severity", "warning")), raw.get("members", "same"),
                   frozenset(raw.get("kept_members", ())))


class NameMap:
    """Qualified names -> entries, with longest-prefix lookup."""

    def __init__(self, entries: Iterable[NameEntry], modules: Iterable[str]) -> None:
        self.exact = {e.cuda: e for e in entries}
        self.modules = frozenset(modules)
        self.roots = frozenset(key.split(".")[0] for key in self.exact)

    def lookup(self, qualified: str) -> tuple[str, NameEntry] | None:
        parts = qualified.split(".")
        for end in range(len(parts), 0, -1):
            key = ".".join(parts[:end])
            entry = self.exact.get(key)
            if entry is not None:
                return key, entry
        return None

    def renamed(self, qualified: str) -> str | None:
        """New name of a rewritable name or of a member of one (members "same"); else None."""
        found = self.lookup(qualified)
        if found is None:
            return None
        key, entry = found
        if entry.action != "rewrite" or entry.npu is None:
            return None
        if key != qualified and entry.members != "same" and qualified[len(key) + 1:] not in entry.kept_members:
            return None
        return entry.npu + qualified[len(key):]


@functools.cache
def name_map(data_file: str, code: str) -> NameMap:
    data = load_data(data_file)
    entries = [NameEntry.from_json(e) for e in data["entries"]
               if e.get("code") == code and e.get("match", "name") == "name"]
    return NameMap(entries, data.get("npu_modules", ()))


def name_prefilter(data_file: str, code: str) -> str:
    r"""A regex matching every chunk that can use a mapped name.

    A use spelled as a chain shows the name's last two parts (`cudnn.benchmark`,
    `nvtx.range_push`, `ProfilerActivity.CUDA`), whichever alias starts it; an import shows the
    last part after `import`; a member of a name whose members are all handled (reported) shows
    that name and a dot (with its owner too when the name is a common word: `cuda.memory.`).
    Missed, a documented limit: uses in other statements through a module alias with another
    name (`import torch.profiler as tp` then `tp.profile`) or an imported name renamed with `as`.
    Every branch starts with a literal (`owner.` or "import"): the prefilter searches each branch
    alone, and `re` skips ahead to a literal fast (a leading `\.` with a lookbehind per name stopped
    at every dot of the text)."""
    pairs: set[tuple[str, str]] = set()
    lasts: set[str] = set()
    members: set[tuple[str, str]] = set()
    for entry in load_data(data_file)["entries"]:
        if entry.get("code") == code and entry.get("match", "name") == "name":
            *_, owner, last = entry["cuda"].split(".")
            pairs.add((owner, last))
            lasts.add(last)
            if entry.get("members") == "flag" or entry["action"] == "flag":
                members.add((owner, last))
    by_owner: dict[str, set[str]] = {}
    for owner, last in pairs:
        by_owner.setdefault(owner, set()).add(last)
    chains = [rf"{re.escape(owner)}\.(?:{_words(names)})\b" for owner, names in sorted(by_owner.items())]
    chains += sorted({rf"{re.escape(last if _distinctive(last) else f'{owner}.{last}')}\.\w" for owner, last in members})
    return "|".join(chains) + rf"|import[ \t]*(?:\([^)]*?|[^\n(]*?)\b(?:{_words(lasts)})\b"


def _distinctive(word: str) -> bool:
    """`nvtx`, `ProfilerActivity`: rare enough in other code to stand alone (`memory` is not)."""
    return len(word) <= 4 or not word.islower() or "_" in word


def _words(words: Iterable[str]) -> str:
    return "|".join(sorted(map(re.escape, words)))


class CoverageRule(Rule):
    """Base of the coverage rules (name resolution is the shared `Rule.resolve`)."""

    # the qualified callees a rule acts at, where it acts at nothing else (each of its visit
    # methods first asks `self.resolve(call.func)` for one of them): its gate is then the lines
    # of the chains that resolve to one (`Rule.target_lines`); empty: no gate
    gate_names: ClassVar[frozenset[str]] = frozenset()

    def target_lines(self) -> list[LineSpan] | None:
        if not self.gate_names:
            return None
        return self.context.model.derived(qualified_references).lines(self.gate_names.__contains__)


class NameMapRule(CoverageRule):
    """Rewrites or flags qualified names listed in a data file (entries with this rule's code).

    Subclasses set `data_file` (and the usual Rule attributes); they may veto the rewrite of a
    particular use by adding the id of its chain to `self.vetoed` in a `visit_*` method that runs
    before the chain is visited (a `visit_Call` for a callee, for example)."""

    data_file: ClassVar[str] = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.names = name_map(self.data_file, self.code)
        self.inner: set[int] = set()  # chains that are part of a longer chain, attr/keyword names
        self.vetoed: set[int] = set()
        self.plans: dict[int, tuple[str, Any]] = {}
        self._heads: frozenset[str] | None = None

    # -- which local names can start a mapped chain ----------------------------------------
    @property
    def heads(self) -> frozenset[str]:
        if self._heads is None:
            self._heads = frozenset(local for local, target in self.context.facts.aliases.items()
                                    if target.split(".")[0] in self.names.roots)
        return self._heads

    def local_for(self, target: str) -> str | None:
        """A local name bound to exactly the module `target` (`th` for `import torch as th`)."""
        for local, bound in self.context.facts.aliases.items():
            if bound == target:
                return local
        return None

    def expression_for(self, new_name: str) -> str | None:
        """Source text for a fully qualified NPU name, using the file's own aliases."""
        if new_name.startswith("torch.npu."):
            torch_local = self.local_for("torch")
            if torch_local:
                return torch_local + new_name[len("torch"):]
            new_name = "torch_npu" + new_name[len("torch"):]
        if new_name.startswith("torch_npu."):
            local = self.local_for("torch_npu")
            if local is None:
                self.context.require_import("torch_npu")
                local = "torch_npu"
            return local + new_name[len("torch_npu"):]
        if new_name.startswith("torch."):
            torch_local = self.local_for("torch")
            return torch_local + new_name[len("torch"):] if torch_local else None
        return None

    # -- bookkeeping of chains -----------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        # ids are only unique while a chunk's tree lives: start afresh for each chunk
        self.inner.clear()
        self.vetoed.clear()
        self.plans.clear()
        self.split_lines.clear()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.inner.add(id(node.attr))
        if isinstance(node.value, (cst.Attribute, cst.Name)):
            self.inner.add(id(node.value))
        if id(node) not in self.inner:
            self._plan_use(node)

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.inner and node.value in self.heads:
            self._plan_use(node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.inner.add(id(node.keyword))

    # Names inside import statements are bindings, not uses. They are marked on the way down
    # (not counted with a depth): another rule may replace an import node, and then this rule's
    # leave_Import is never called for it.
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._mark_names(alias.name)
            if alias.asname is not None:
                self._mark_names(alias.asname.name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._mark_names(node.module)
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                self._mark_names(alias.name)
                if alias.asname is not None:
                    self._mark_names(alias.asname.name)

    def _mark_names(self, node: cst.CSTNode) -> None:
        while isinstance(node, cst.Attribute):
            self.inner.add(id(node))
            self.inner.add(id(node.attr))
            node = node.value
        self.inner.add(id(node))

    def _plan_use(self, node: cst.Attribute | cst.Name) -> None:
        parts = dotted_parts(node)
        if not parts or parts[0] not in self.heads or id(node) in self.vetoed:
            return
        bound = self.context.facts.aliases[parts[0]]
        qualified = ".".join([bound, *parts[1:]])
        found = self.names.lookup(qualified)
        if found is None:
            return
        key, entry = found
        if entry.action == "flag":
            self.plans[id(node)] = ("report", (entry.message or f"`{key}` has no NPU equivalent",
                                               entry.severity))
            return
        if entry.action != "rewrite":
            return
        if len(key) <= len(bound):  # the import binding is rewritten; uses stay as they are
            if key != qualified and entry.members == "flag" and qualified != bound:
                self.plans[id(node)] = ("report", (self.no_member(qualified, key, entry),
                                                   Severity.WARNING))
            return
        new_name = self.names.renamed(qualified)
        if new_name is None:
            self.plans[id(node)] = ("report", (self.no_member(qualified, key, entry), Severity.WARNING))
            return
        too_new = npu_too_new(self.context.options, new_name)
        if too_new is not None:  # target-version: the oldest torch_npu lacks it
            self.plans[id(node)] = ("report", (too_new, Severity.WARNING))
            return
        new_bound = self.names.renamed(bound) or bound
        text: str | None
        if new_name.startswith(new_bound + "."):
            text = parts[0] + new_name[len(new_bound):]
        else:
            text = self.expression_for(new_name)
        if text is None:
            self.plans[id(node)] = ("report", (f"use `{new_name}` instead of `{qualified}`",
                                               Severity.WARNING))
            return
        old_text = ".".join(parts)
        if text != old_text:
            self.plans[id(node)] = ("rewrite", (old_text, text, entry))

    def no_member(self, qualified: str, key: str, entry: NameEntry) -> str:
        return f"`{qualified}` has no counterpart in `{entry.npu}`" + (
            f" ({entry.message})" if entry.message else "")

    @property
    def split_lines(self) -> dict[int, list[cst.ImportFrom]]:
        """Import lines to add after a split `from` import, keyed by the original statement.
        Shared by all coverage rules of the file: several may split the same import, and only
        the first one's leave_SimpleStatementLine runs once the line is replaced."""
        lines: dict[int, list[cst.ImportFrom]] = self.context.__dict__.setdefault("_coverage_split_lines", {})
        return lines

    # -- acting on the plans ---------------------------------------------------------------------
    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        result: cst.BaseExpression = self._act(original_node, updated_node)
        return result

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        result: cst.BaseExpression = self._act(original_node, updated_node)
        return result

    def _act(self, original_node: cst.CSTNode, updated_node: Any) -> Any:
        plan = self.plans.pop(id(original_node), None)
        if plan is None:
            return updated_node
        kind, data = plan
        if kind == "report":
            message, severity = data
            self.report(original_node, message, severity=severity)
            return updated_node
        old_text, text, entry = data
        self.fixed(original_node, f"`{old_text}` → `{text}`")
        if entry.message:
            self.report(original_node, entry.message, severity=entry.severity)
        return dotted_expr(text)

    # -- imports ---------------------------------------------------------------------------------
    def import_target(self, bound: str) -> tuple[str, str, NameEntry] | str | None:
        """For a binding `bound`: (module, name, entry) of its NPU import, a message to report, or
        None."""
        found = self.names.lookup(bound)
        if found is None:
            return None
        key, entry = found
        if entry.action == "flag":
            return entry.message or f"`{key}` has no NPU equivalent"
        if entry.action != "rewrite":
            return None
        new_name = self.names.renamed(bound)
        if new_name is None:
            return self.no_member(bound, key, entry)
        too_new = npu_too_new(self.context.options, new_name)
        if too_new is not None:
            return too_new
        if new_name.startswith("torch.npu."):  # import from the real package, not the alias
            new_name = "torch_npu" + new_name[len("torch"):]
        module, _, name = new_name.rpartition(".")
        if module not in self.names.modules:
            return f"`{new_name}` cannot be imported by name: import `{module}` and use `{new_name}`"
        return module, name, entry

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> Any:
        names = updated_node.names
        local = alias_asname(names[0]) if len(names) == 1 else None
        if local is None:
            return updated_node  # `import torch.cuda.nvtx` binds `torch`: uses are rewritten
        alias = names[0]
        bound = dotted_name(alias.name)
        target = self.import_target(bound) if bound else None
        if target is None:
            return updated_node
        if isinstance(target, str):
            self.report(original_node, target)
            return updated_node
        module, name, entry = target
        if entry.message:
            self.report(original_node, entry.message, severity=entry.severity)
        new = cst.ImportFrom(module=dotted_expr(module),
                             names=[cst.ImportAlias(name=cst.Name(name), asname=cst.AsName(name=cst.Name(local)))
                                    if name != local else cst.ImportAlias(name=cst.Name(name))])
        self.fixed(original_node, f"`import {bound} as {local}` → "
                                  f"`from {module} import {name} as {local}`")
        return new

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> Any:
        base = dotted_name(updated_node.module)
        if (updated_node.relative or base is None or isinstance(updated_node.names, cst.ImportStar)
                or isinstance(original_node.names, cst.ImportStar)):
            return updated_node
        if base.split(".")[0] not in self.names.roots:
            return updated_node
        targets = [(alias, self.import_target(f"{base}.{dotted_name(alias.name)}"))
                   for alias in updated_node.names]
        for original_alias, (_, target) in zip(original_node.names, targets):
            if isinstance(target, str):
                self.report(original_alias, target)
        moved = [(alias, t) for alias, t in targets if isinstance(t, tuple)]
        if not moved:
            return updated_node
        kept = [alias for alias, t in targets if not isinstance(t, tuple)]
        groups: dict[str, list[cst.ImportAlias]] = {}
        names: dict[str, list[str]] = {}
        for alias, (module, name, entry) in moved:
            groups.setdefault(module, []).append(self._renamed_alias(alias, name))
            names.setdefault(module, []).append(dotted_name(alias.name) or name)
            if entry.message:
                self.report(original_node, entry.message, severity=entry.severity)
        if not kept and len(groups) == 1:
            module, aliases = next(iter(groups.items()))
            self.fixed(original_node, f"`from {base} import …` → `from {module} import …`")
            return updated_node.with_changes(module=dotted_expr(module), names=aliases)
        # some names stay where they are: keep them, and import the others on lines of their own
        if kept:
            kept[-1] = kept[-1].with_changes(comma=_closing_comma(kept[-1].comma, updated_node.names[-1].comma))
        extra = []
        for module, aliases in groups.items():
            bare = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in aliases]
            extra.append(cst.ImportFrom(module=dotted_expr(module), names=bare))
            self.fixed(original_node, f"`from {base} import {', '.join(names[module])}` → "
                                      f"`from {module} import …`")
        if not kept:
            first, *rest = extra
            self.split_lines.setdefault(id(original_node), []).extend(rest)
            return first
        self.split_lines.setdefault(id(original_node), []).extend(extra)
        return updated_node.with_changes(names=kept)

    @staticmethod
    def _renamed_alias(alias: cst.ImportAlias, name: str) -> cst.ImportAlias:
        old = dotted_name(alias.name) or name
        if name == old:
            return alias
        if alias.asname is not None:
            return alias.with_changes(name=cst.Name(name))
        return alias.with_changes(name=cst.Name(name), asname=cst.AsName(name=cst.Name(old)))

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        if not self.split_lines:
            return updated_node
        extra = [stmt for small in original_node.body for stmt in self.split_lines.pop(id(small), ())]
        if not extra:
            return updated_node
        lines = [cst.SimpleStatementLine(body=[stmt]) for stmt in extra]
        return cst.FlattenSentinel([updated_node, *lines])


def _closing_comma(own: Any, last: Any) -> Any:
    """The comma after the last kept import name: the statement's own ending (trailing comma or
    none, and where the closing parenthesis sits), keeping a comment that followed the name."""
    if (isinstance(own, cst.Comma) and isinstance(last, cst.Comma)
            and isinstance(own.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(last.whitespace_after, cst.ParenthesizedWhitespace)):
        return own.with_changes(whitespace_after=own.whitespace_after.with_changes(
            indent=last.whitespace_after.indent, last_line=last.whitespace_after.last_line))
    return last

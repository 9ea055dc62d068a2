"""Third-party calls with an exact NPU route (NPU302, NPU304, NPU305, NPU306): each call is
rewritten when its arguments map exactly, and stays with an error that says why when they do
not; a `from library import name` whose every use in the file is a rewritten call goes with
them (the library is not installable on NPU, so the import alone would stop the program).
Everything else of the library is reported as `ThirdPartyRule` does."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import ClassVar

import libcst as cst

from codemods.api.rule import Fix
from codemods.families.third_party import ThirdPartyRule
from codemods.model.cstnodes import alias_local, dotted_name
from npu_migrate.core.diagnostics import Severity

RequireImport = Callable[[str], None]


class RoutedCallRule(ThirdPartyRule):
    fix = Fix.UNSAFE
    library: ClassVar[str] = ""  # its display name, for the reports
    modules: ClassVar[tuple[str, ...]] = ()  # the modules whose `from ... import` lines may be dropped

    def routed(self, qualified: str | None) -> str | None:
        """The key of a call this rule routes (its function's short name), or None."""
        raise NotImplementedError

    def route(self, node: cst.Call, function: str, require_import: RequireImport) -> tuple[str | None, str]:
        """(the rewritten call's code, what it is) or (None, why the call stays)."""
        raise NotImplementedError

    def _report_call(self, node: cst.Call) -> bool:
        if self.routed(self._qualify(node.func)):
            return True  # leave_Call rewrites it or says why not
        return super()._report_call(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        function = self.routed(self._qualify(original_node.func))
        if function is None:
            return updated_node
        call, what = self.route(updated_node, function, self.context.require_import)
        if call is None:
            self.report(original_node, f"`{function}` stays ({self.library} runs only on CUDA): {what}",
                        severity=Severity.ERROR)
            return updated_node
        self.fixed(original_node, f"`{function}` as {what}")
        return cst.parse_expression(call)

    # -- the imports of routed names --------------------------------------------------------
    def _report_import(self, node: cst.CSTNode, qualified: str) -> None:
        if node not in self.tree.nodes("dropped_imports"):
            super()._report_import(node, qualified)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module and not node.relative else None
        if module in self.modules and not isinstance(node.names, cst.ImportStar):
            self.tree.nodes("dropped_imports").update(a for a in node.names if self._all_uses_routed(module, a))
        super().visit_ImportFrom(node)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        dropped = self.tree.nodes("dropped_imports")
        if isinstance(original_node.names, cst.ImportStar) or isinstance(updated_node.names, cst.ImportStar) \
                or not dropped & set(original_node.names):
            return updated_node
        for alias in original_node.names:
            if alias in dropped:
                self.fixed(alias, f"`{alias_local(alias)}` removed from the import: every call of it was rewritten")
        kept = [new for old, new in zip(original_node.names, updated_node.names) if old not in dropped]
        if not kept:
            return cst.RemovalSentinel.REMOVE
        return updated_node.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])

    def _all_uses_routed(self, module: str, alias: cst.ImportAlias) -> bool:
        """Whether `alias` imports a routed function every use of which in the file is a call
        this rule rewrites. A name bound again (`except ImportError: f = None`) or used as a value
        (`if f is not None`) keeps its import."""
        function = self.routed(f"{module}.{dotted_name(alias.name)}")
        local = alias_local(alias)
        if function is None or not local:
            return False
        tree = self.context.facts.tree
        uses = {id(n) for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == local}
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and id(n.func) in uses]
        if not uses or len(calls) != len(uses):
            return False
        for call in calls:
            segment = ast.get_source_segment(self.context.source, call)
            parsed = cst.parse_expression(segment) if segment else None
            if not isinstance(parsed, cst.Call) or self.route(parsed, function, lambda _module: None)[0] is None:
                return False
        return True

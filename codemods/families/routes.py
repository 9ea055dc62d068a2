"""Third-party calls with an exact NPU route (NPU302, NPU304, NPU305, NPU306): each call is
rewritten when its arguments map exactly, and stays with an error that says why when they do
not; an import whose every use in the file goes with a rewritten call goes with them (the
library is not installable on NPU, so the import alone would stop the program). Everything else of the library is reported as `ThirdPartyRule` does."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import libcst as cst

from codemods.api.rule import Fix
from codemods.api.targets import api_table, too_old, version_allows
from codemods.data.tables import load_data
from codemods.families.third_party import ThirdPartyRule
from codemods.families.tune import line_of
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.cstnodes import alias_local, bind, dotted_name
from npu_migrate.core.diagnostics import Severity

RequireImport = Callable[[str], None]
ROUTES = "routes.json"  # which names of which library version map to what, which arguments map
AnyImport = TypeVar("AnyImport", cst.Import, cst.ImportFrom)
_CUDA_TEST = re.compile(r"cuda", re.IGNORECASE)


def call_routes(library: str) -> dict[str, Any]:
    """The routed functions of a library (`flash-attn`, `xformers`) from routes.json: its
    modules, each function's parameters and layout, the keywords that map only at some values."""
    routes: dict[str, Any] = load_data(ROUTES)["calls"][library]
    return routes


def keyword_problem(args: Mapping[str, str], keywords: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why a call's keyword argument keeps it as written (a value other than the route's
    `plain` ones, spaces removed), or None: every keyword maps."""
    for keyword, facts in keywords.items():
        plain = facts.get("plain")
        if plain and keyword in args and re.sub(r"\s", "", args[keyword]) not in plain:
            return str(facts["unmapped"])
    return None


def cuda_guarded_lines(model: Any) -> frozenset[int]:
    """The lines of the branches a CUDA test selects (`if torch.cuda.is_available():`,
    `if x.is_cuda:`, the `else` of `if not ...:` or `!= "cuda"`). A routed call there stays as
    written: CUDA machines keep the library the authors chose, and the NPU takes the other branch
    (NPU511 keeps such guards on CUDA)."""
    lines: set[int] = set()
    for node in ast.walk(model.facts.tree):
        if not (isinstance(node, ast.If) and _CUDA_TEST.search(ast.unparse(node.test))):
            continue
        test = node.test
        negative = (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)) or (
            isinstance(test, ast.Compare) and any(isinstance(op, (ast.NotEq, ast.IsNot)) for op in test.ops))
        for statement in node.orelse if negative else node.body:
            lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return frozenset(lines)


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
        if function is None or line_of(self, original_node) in self.context.model.derived(cuda_guarded_lines):
            return updated_node
        call, what = self.route(updated_node, function, self.context.require_import)
        if call is None:
            self.report(original_node, f"`{function}` stays ({self.library} runs only on CUDA): {what}",
                        severity=Severity.ERROR)
            return updated_node
        self.fixed(original_node, f"`{function}` as {what}")
        return cst.parse_expression(call)

    # -- the imports the rewritten calls leave unused ------------------------------------------
    def consumed(self, call: ast.Call) -> list[ast.AST]:
        """The parts of a routed call that its rewrite does not copy: names used only there go
        with it (xFormers' `attn_bias=xops.LowerTriangularMask()` besides the function)."""
        return [call.func]

    def _report_import(self, node: cst.CSTNode, qualified: str) -> None:
        if node not in self.tree.nodes("dropped_imports"):
            super()._report_import(node, qualified)

    def visit_Import(self, node: cst.Import) -> None:
        self.tree.nodes("dropped_imports").update(
            a for a in node.names if self._ours(dotted_name(a.name)) and self._unused_after(alias_local(a).split(".")[0]))
        super().visit_Import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module and not node.relative else None
        if self._ours(module) and not isinstance(node.names, cst.ImportStar):
            self.tree.nodes("dropped_imports").update(a for a in node.names if self._unused_after(alias_local(a)))
        super().visit_ImportFrom(node)

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import | cst.RemovalSentinel:
        return self._without_dropped(original_node, updated_node)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        return self._without_dropped(original_node, updated_node)

    def _without_dropped(self, original: AnyImport, updated: AnyImport) -> AnyImport | cst.RemovalSentinel:
        dropped = self.tree.nodes("dropped_imports")
        names, new_names = original.names, updated.names
        if isinstance(names, cst.ImportStar) or isinstance(new_names, cst.ImportStar) or not dropped & set(names):
            return updated
        for alias in names:
            if alias in dropped:
                self.fixed(alias, f"`{alias_local(alias)}` removed from the import: every use of it was rewritten")
        kept: list[cst.ImportAlias] = [new for old, new in zip(names, new_names) if old not in dropped]
        if not kept:
            return cst.RemovalSentinel.REMOVE
        return updated.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])

    def _ours(self, module: str | None) -> bool:
        """Whether `module` belongs to the library whose calls this rule routes."""
        return module is not None and module.split(".")[0] in {m.split(".")[0] for m in self.modules}

    def _unused_after(self, local: str) -> bool:
        """Whether every use of the imported name `local` goes with a rewritten call. A name
        bound again (`except ImportError: f = None`), used as a value (`if f is not None`), or in a
        call that stays keeps its import."""
        uses = [n for n in ast.walk(self.context.facts.tree) if isinstance(n, ast.Name) and n.id == local]
        spans = self._consumed_spans()
        return bool(uses) and all(any(_inside(use, span) for span in spans) for use in uses)

    def _consumed_spans(self) -> list[ast.AST]:
        """The `consumed` parts of every call of the file this rule rewrites (computed once)."""
        found: list[ast.AST] | None = self.file.get("consumed")
        if found is not None:
            return found
        found = []
        guarded = self.context.model.derived(cuda_guarded_lines)
        for call in ast.walk(self.context.facts.tree):
            if not isinstance(call, ast.Call) or call.lineno in guarded:
                continue
            parts = ast_dotted_parts(call.func)
            function = self.routed(self.context.facts.qualify(parts) if parts else None)
            segment = ast.get_source_segment(self.context.source, call) if function else None
            parsed = cst.parse_expression(segment) if segment else None
            if function and isinstance(parsed, cst.Call) and self.route(parsed, function, lambda _module: None)[0]:
                found += self.consumed(call)
        self.file["consumed"] = found
        return found


def _inside(node: ast.AST, span: ast.AST) -> bool:
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return (span.lineno, span.col_offset) <= start and end <= (span.end_lineno, span.end_col_offset)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ConstructorRoute:
    """A class of a CUDA-only library whose constructor maps onto a torch one: `parameters` in the
    library's positional order; `fixed` the parameters the route takes only at the given values
    (spaces removed; a value absent from the call counts as its first), with the reason any other
    value stays; `dropped` those the route has no use for at any literal value; `spelled` the
    defaults the torch class would not share, written out when the call leaves them out; `choose`
    a parameter whose literal value picks the torch class (value -> class)."""

    torch_class: str
    parameters: tuple[str, ...]
    fixed: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    spelled: Mapping[str, str] = field(default_factory=dict)
    choose: tuple[str, Mapping[str, str]] | None = None

    @classmethod
    def from_data(cls, route: Mapping[str, Any]) -> ConstructorRoute:
        """A route as routes.json spells it (`constructors.<module>.classes.<class>`)."""
        choose = route.get("choose")
        return cls(route["torch_class"], tuple(route["parameters"]),
                   fixed={name: (tuple(rule["values"]), rule["reason"]) for name, rule in route.get("fixed", {}).items()},
                   dropped=tuple(route.get("dropped", ())), spelled=dict(route.get("spelled", {})),
                   choose=(choose["parameter"], dict(choose["classes"])) if choose else None)

    def rewrite(self, call: cst.Call) -> tuple[str | None, str]:
        """(the torch constructor call's code, the torch class) or (None, why the call stays)."""
        args, problem = bind(call, self.parameters)
        if problem is not None:
            return None, problem
        if self.parameters[0] not in args:
            return None, f"`{self.parameters[0]}` is not given"
        for name, (values, reason) in self.fixed.items():
            if re.sub(r"\s", "", args.get(name, values[0])) not in values:
                return None, f"`{name}={args[name]}`: {reason}"
        for name in self.dropped:
            if name in args and not _literal(args[name]):
                return None, f"`{name}` is not a literal"
        torch_class = self.torch_class
        if self.choose is not None:
            name, classes = self.choose
            torch_class = classes.get(args.get(name, next(iter(classes))), "")
            if not torch_class:
                return None, f"`{name}={args[name]}` is not a literal: the torch class cannot be chosen"
        skipped = {*self.fixed, *self.dropped, *(self.choose[:1] if self.choose else ())}
        written = [args[self.parameters[0]]] + [f"{name}={args[name]}" for name in self.parameters[1:]
                                                if name in args and name not in skipped]
        written += [f"{name}={value}" for name, value in self.spelled.items() if name not in args]
        return f"{torch_class}({', '.join(written)})", torch_class


def _literal(code: str) -> bool:
    try:
        ast.literal_eval(code)
    except (ValueError, SyntaxError):
        return False
    return True


def constructor_routes(module: str) -> dict[str, ConstructorRoute]:
    """The routed classes of a library module (`apex.optimizers`) from routes.json, by name."""
    classes = load_data(ROUTES)["constructors"][module]["classes"]
    return {name: ConstructorRoute.from_data(route) for name, route in classes.items()}


class ConstructorRouteRule(RoutedCallRule):
    """A rule whose routed calls are constructors (`routes`, by class name, found in `modules`
    or a submodule of them); a torch class newer than target-version keeps the call."""

    routes: ClassVar[Mapping[str, ConstructorRoute]] = {}

    def routed(self, qualified: str | None) -> str | None:
        if qualified is None:
            return None
        module, _, name = qualified.rpartition(".")
        inside = any(module == m or module.startswith(m + ".") for m in self.modules)
        return name if inside and name in self.routes else None

    def route(self, node: cst.Call, function: str, require_import: RequireImport) -> tuple[str | None, str]:
        call, torch_class = self.routes[function].rewrite(node)
        if call is None:
            return None, torch_class
        if torch_class in api_table() and not version_allows(self.context.options, torch_class):
            return None, too_old(self.context.options, torch_class)
        require_import("torch")
        return call, f"`{torch_class}`"

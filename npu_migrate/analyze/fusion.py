"""Fusion opportunities in model code: operator sequences that one fused NPU kernel (or
torch.compile) can run. Looked for in the methods of nn.Module candidates, following both
nested calls (`act(bn(conv(x)))`) and consecutive assignments (`x = conv(x); x = bn(x)`), and
in `nn.Sequential(...)` argument lists."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from npu_migrate.analyze import catalog
from npu_migrate.analyze.findings import Located, finding
from npu_migrate.core.diagnostics import Diagnostic

ELEMENTWISE_CALLS = frozenset({"exp", "log", "sigmoid", "tanh", "sqrt", "rsqrt", "pow", "abs", "erf",
                               "clamp", "where", "relu", "gelu", "silu"})
_BODIES = ("body", "orelse", "finalbody")


def fusion_finding(path: str, where: Located, pattern: str) -> Diagnostic:
    spec = catalog.load("fusion")["patterns"][pattern]
    shown = f"def {where.name}" if isinstance(where, ast.FunctionDef) else ast.unparse(where)
    shown = shown if len(shown) <= 90 else shown[:87] + "..."
    return finding("ANA031", path, where, f"fusion ({pattern}): {spec['summary']} → {spec['route']}",
                   evidence=[f"{pattern} at line {where.lineno}: `{shown}`"])


def callable_kind(name: str | None) -> str | None:
    """The fusion role of a torch callable: linear, conv, bn, ln, rms, softmax or act:<name>."""
    entry = catalog.operators().get(name) if name else None
    if entry is None or name is None:
        return None
    short = name.rsplit(".", 1)[-1].lower()
    cls = entry["class"]
    if cls == "matmul/linear" and "linear" in short:
        return "linear"
    if cls == "convolution":
        return "conv"
    if cls == "normalisation":
        for key, kind in (("batch", "bn"), ("layer", "ln"), ("rms", "rms")):
            if key in short:
                return kind
        return None
    if cls == "activation":
        return "softmax" if "softmax" in short else f"act:{short}"
    return None


class ClassFusion:
    def __init__(self, path: str, qualify: Callable[[ast.AST], str | None]) -> None:
        self.path = path
        self.qualify = qualify
        self.attrs: dict[str, str] = {}
        self.found: dict[tuple[str, int], Diagnostic] = {}

    def report(self, where: Located, pattern: str) -> None:
        self.found.setdefault((pattern, where.lineno), fusion_finding(self.path, where, pattern))

    def analyze(self, node: ast.ClassDef) -> list[Diagnostic]:
        methods = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for method in methods:
            for child in ast.walk(method):
                if isinstance(child, ast.Assign) and isinstance(child.value, ast.Call):
                    self._attribute_layer(child, child.value)
        for method in methods:
            self._function(method)
        return list(self.found.values())

    def _attribute_layer(self, node: ast.Assign, call: ast.Call) -> None:
        target = node.targets[0]
        name = self.qualify(call.func)
        if name and name.endswith(".Sequential"):
            self._sequence([self.kind(a) for a in call.args], call)
        if (len(node.targets) == 1 and type(target) is ast.Attribute and type(target.value) is ast.Name
                and target.value.id == "self"):
            kind = callable_kind(name)
            if kind:
                self.attrs[target.attr] = kind

    def kind(self, node: ast.AST) -> str | None:
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
            return self.attrs.get(func.attr)
        if type(func) is ast.Attribute and func.attr in ("softmax", "log_softmax") and self.qualify(func) is None:
            return "softmax"
        return callable_kind(self.qualify(func))

    def _sequence(self, kinds: list[str | None], where: Located) -> None:
        for i, kind in enumerate(kinds):
            after = kinds[i + 1:i + 3]
            if kind == "linear" and after[:1] and (after[0] or "").startswith("act:"):
                self.report(where, "linear+activation")
            elif kind == "conv" and after[:1] == ["bn"]:
                with_act = len(after) > 1 and (after[1] or "").startswith("act:")
                self.report(where, "conv+batchnorm+activation" if with_act else "conv+batchnorm")

    def _nested_chain(self, node: ast.Call) -> list[str | None]:
        chain: list[str | None] = []
        current: ast.AST = node
        while isinstance(current, ast.Call):
            kind = self.kind(current)
            if kind is None:
                break
            chain.append(kind)
            if not current.args:
                break
            current = current.args[0]
        chain.reverse()
        return chain

    def _function(self, function: ast.AST) -> None:
        for block in _blocks(function):
            self._statements(block)
        nested: set[int] = set()
        for child in ast.walk(function):
            if isinstance(child, ast.Call):
                self._call(child, nested)
            elif isinstance(child, ast.BinOp) and id(child) not in nested:
                self._binop(child, nested, getattr(function, "name", "") == "forward")

    def _statements(self, statements: list[ast.stmt]) -> None:
        chain: list[str | None] = []
        previous: str | None = None
        start: ast.stmt | None = None
        for stmt in statements:
            single = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            value = stmt.value if isinstance(stmt, ast.Assign) and single else None
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and single else None
            if isinstance(value, ast.Call) and isinstance(target, ast.Name) and self.kind(value):
                links = self._nested_chain(value)
                source: ast.expr = value
                while isinstance(source, ast.Call) and source.args and self.kind(source.args[0]):
                    source = source.args[0]
                first = source.args[0] if isinstance(source, ast.Call) and source.args else None
                if previous is not None and type(first) is ast.Name and first.id == previous:
                    chain += links
                else:
                    self._sequence(chain, start) if start is not None else None
                    chain, start = list(links), stmt
                previous = target.id
            else:
                if start is not None:
                    self._sequence(chain, start)
                chain, previous, start = [], None, None
        if start is not None:
            self._sequence(chain, start)

    def _call(self, node: ast.Call, nested: set[int]) -> None:
        kind = self.kind(node)
        if kind and id(node) not in nested:
            chain = self._nested_chain(node)
            if len(chain) > 1:
                self._sequence(chain, node)
            inner = node.args[0] if node.args else None
            while type(inner) is ast.Call and self.kind(inner):
                nested.add(id(inner))
                inner = inner.args[0] if inner.args else None
        first = node.args[0] if node.args else None
        if kind == "softmax" and first is not None and _has_matmul(first, self.qualify):
            self.report(node, "attention")
        elif kind in ("ln", "rms") and type(first) is ast.BinOp and type(first.op) is ast.Add:
            self.report(node, "add+layer_norm" if kind == "ln" else "add+rms_norm")
        elif first is not None and (self.qualify(node.func) or "").endswith("rsqrt") and _is_mean_square(first):
            self.report(node, "rms_norm")

    def _binop(self, node: ast.BinOp, nested: set[int], in_forward: bool) -> None:
        if type(node.op) is ast.Mult:
            for side in (node.left, node.right):
                kind = self.kind(side)
                if kind == "act:silu":
                    self.report(node, "swiglu")
                elif kind == "act:gelu":
                    self.report(node, "geglu")
        if type(node.op) is ast.Mult and (_is_mean_square(node.left) or _is_mean_square(node.right)):
            return
        count, has_matmul = 0, False
        for child in ast.walk(node):
            if type(child) is ast.BinOp:
                nested.add(id(child))
                count += 1
                has_matmul = has_matmul or type(child.op) is ast.MatMult
            elif type(child) is ast.Call and type(child.func) is ast.Attribute and child.func.attr in ELEMENTWISE_CALLS:
                count += 1
        if in_forward and not has_matmul and count >= catalog.load("fusion")["elementwise_chain_min_ops"]:
            self.report(node, "elementwise_chain")


def _blocks(function: ast.AST) -> Iterator[list[ast.stmt]]:
    stack = [function]
    while stack:
        node = stack.pop()
        for name in _BODIES:
            block = getattr(node, name, None)
            if block:
                yield block
                stack.extend(s for s in block if hasattr(s, "body"))


def _has_matmul(node: ast.AST, qualify: Callable[[ast.AST], str | None]) -> bool:
    for child in ast.walk(node):
        if type(child) is ast.BinOp and type(child.op) is ast.MatMult:
            return True
        if type(child) is ast.Call:
            name = qualify(child.func) or ""
            if name in ("torch.matmul", "torch.bmm", "torch.einsum", "torch.baddbmm") or (
                    type(child.func) is ast.Attribute and child.func.attr in ("matmul", "bmm")):
                return True
    return False


def _is_mean_square(node: ast.AST) -> bool:
    """`x.pow(2).mean(...)` or `(x ** 2).mean(...)`, possibly plus eps, possibly under rsqrt."""
    has_square = has_mean = False
    for child in ast.walk(node):
        if type(child) is ast.Call and type(child.func) is ast.Attribute:
            if child.func.attr == "mean":
                has_mean = True
            elif child.func.attr == "pow" and child.args and type(child.args[0]) is ast.Constant and child.args[0].value == 2:
                has_square = True
        elif type(child) is ast.BinOp and type(child.op) is ast.Pow and type(child.right) is ast.Constant and child.right.value == 2:
            has_square = True
    return has_square and has_mean

"""The rule runner walks LibCST trees without rebuilding them (`codemods.model.cstnodes.children_of`):
it must meet the nodes in LibCST's own order, and rebuild exactly what LibCST's transformer would."""

from __future__ import annotations

import glob
import os

import libcst as cst
import pytest

from codemods.api.rule import Rule, RuleContext
from codemods.api.runner import RuleRunner
from codemods.model.cstnodes import child_fields, children_of, find_all
from codemods.model.filemodel import FileModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# syntax the repository's own files may not use: match, type parameters, f-string specs,
# star imports, walrus, async, decorators, global/nonlocal, del, lambda defaults, slices
SYNTAX = '''\
from __future__ import annotations
from os.path import *
from . import (a as b,  # comment
    c)
import x.y as z, w
@dec(1)
@other
async def f[T: int = str](a, /, b: int = 2, *args: T, c, d=3, **kw) -> None:
    global g
    async with ctx() as (p, q), other:
        async for i in aiter():
            yield from i
    await y
    return [x async for x in z if x] or {k: v for k, v in d.items()} or {*s}
class C(Base, metaclass=M):
    x: int = 1
    def g(self):
        nonlocal_ = lambda q=1, *r, s, **t: q
        del self.x[1:2, ::3], self.y
        match command.split():
            case [action, *rest] if action:
                pass
            case {"k": v, **kw}:
                pass
            case Point(x=0, y=1) | None:
                pass
            case _:
                raise ValueError(f"{value!r:>{width}} {x=}") from None
        try:
            pass
        except* (A, B) as e:
            assert e, "msg"
        else:
            print(*a, **k, sep="")
        finally:
            (n := 10)
        while not a and b or c is not d:
            continue
        return a if b else -c ** ~d @ e
type Alias[K] = dict[K, int]
'''


def _sources() -> list[str]:
    files = sorted(glob.glob(os.path.join(ROOT, "codemods", "**", "*.py"), recursive=True))[:40]
    return [SYNTAX] + [open(path, encoding="utf-8").read() for path in files]


class _Order(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.seen.append(id(node))
        return True


def _preorder(node: cst.CSTNode) -> list[int]:
    found = [id(node)]
    for child in children_of(node):
        found += _preorder(child)
    return found


@pytest.mark.parametrize("source", _sources()[:1] + ["\n".join(_sources()[1:])], ids=["syntax", "codemods"])
def test_children_come_in_libcsts_visiting_order(source: str) -> None:
    module = cst.parse_module(source)
    order = _Order()
    module.visit(order)
    assert _preorder(module) == order.seen
    assert len(order.seen) > 200


def test_child_fields_follow_the_source_not_the_dataclass() -> None:
    fields = child_fields(cst.FunctionDef)
    assert fields.index("decorators") < fields.index("name") < fields.index("params") < fields.index("body")
    assert child_fields(cst.Newline) == ()


def test_find_all_finds_what_a_visitor_finds() -> None:
    module = cst.parse_module(SYNTAX)

    class Calls(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[cst.CSTNode] = []

        def visit_Call(self, node: cst.Call) -> None:
            self.found.append(node)

    calls = Calls()
    module.visit(calls)
    assert find_all(module, cst.Call) == calls.found and len(calls.found) > 5


class _Rewrites(cst.CSTTransformer):
    """Renames, removes a statement, flattens one into two, removes every statement of a line."""

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value="renamed") if original_node.value == "x" else updated_node

    def leave_Pass(self, original_node: cst.Pass, updated_node: cst.Pass) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> object:
        if isinstance(updated_node.value, cst.Await):
            return cst.FlattenSentinel([updated_node, cst.Expr(cst.Name("after"))])
        return updated_node


class _RewritesAsRule(Rule):
    """The same rewrites written as a rule, served through the rule runner."""

    code = "T001"
    leave_Name = _Rewrites.leave_Name
    leave_Pass = _Rewrites.leave_Pass
    leave_Expr = _Rewrites.leave_Expr


def test_the_runner_rebuilds_what_libcsts_transformer_rebuilds() -> None:
    source = SYNTAX + "def h():\n    pass\n    return 1\n"
    module = cst.parse_module(source)
    expected = module.visit(_Rewrites()).code
    context = RuleContext(FileModel.empty("t.py", source))  # the rule reads no facts
    runner = RuleRunner([_RewritesAsRule(context)])
    new, _ = runner.run(module, 0)
    assert new.code == expected
    assert "renamed" in expected and "after" in expected and "def h():\n    return 1" in expected
    unchanged = cst.parse_module("y = 1\n")
    assert runner.run(unchanged, 0)[0] is unchanged  # nothing changed: nothing rebuilt


class _Counts(Rule):
    """Counts the nodes of a few kinds the runner hands it."""

    code = "T002"

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.calls = self.commas = 0

    def visit_Call(self, node: cst.Call) -> None:
        self.calls += 1


class _CountsCommas(_Counts):
    code = "T003"

    def visit_Comma(self, node: cst.Comma) -> None:
        self.commas += 1


def test_trivia_is_skipped_only_where_no_rule_handles_it() -> None:
    module = cst.parse_module(SYNTAX)
    context = RuleContext(FileModel.empty("t.py", SYNTAX))
    plain, commas = _Counts(context), _CountsCommas(context)
    assert RuleRunner([plain])._skipped >= {cst.Comma, cst.SimpleWhitespace, cst.Name}
    RuleRunner([plain]).run(module, 0)
    RuleRunner([commas]).run(module, 0)
    assert plain.calls == commas.calls == len(find_all(module, cst.Call)) > 5
    assert commas.commas == len(find_all(module, cst.Comma)) > 5  # a rule on commas meets every one
    assert not RuleRunner([commas])._skipped

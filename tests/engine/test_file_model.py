"""The per-file model's one walk: what `of_type` and `parents` give must be what `ast.walk` gives."""

import ast
from pathlib import Path

import pytest

from codemods.model.filemodel import FileModel

SOURCES = sorted((Path(__file__).resolve().parents[2] / "codemods" / "analyses").glob("*.py"))


def _model(path: Path) -> FileModel:
    text = path.read_text(encoding="utf-8")
    return FileModel(str(path), text, ast.parse(text))


@pytest.mark.parametrize("path", SOURCES[:6], ids=lambda p: p.name)
def test_several_types_come_in_walk_order_with_subclasses(path: Path) -> None:
    model = _model(path)
    kinds = (ast.Call, ast.stmt, ast.Constant, ast.JoinedStr)
    expected = [node for node in ast.walk(model.tree) if isinstance(node, kinds)]
    assert model.of_type(*kinds) == expected


@pytest.mark.parametrize("path", SOURCES[:6], ids=lambda p: p.name)
def test_one_type_and_parents_match_ast_walk(path: Path) -> None:
    model = _model(path)
    for kind in (ast.Name, ast.Attribute, ast.If, ast.keyword, ast.alias, ast.arg):
        assert model.of_type(kind) == [node for node in ast.walk(model.tree) if type(node) is kind]
    for node in ast.walk(model.tree):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)):
                assert model.parents[id(child)] is node


def test_contexts_and_operators_are_not_walked() -> None:
    model = FileModel("<t>", "a = b + c\n", ast.parse("a = b + c\n"))
    assert model.of_type(ast.Load) == [] and model.of_type(ast.Add) == []
    assert [type(n) for n in model.of_type(ast.Name, ast.BinOp)] == [ast.Name, ast.BinOp, ast.Name, ast.Name]

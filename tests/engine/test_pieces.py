"""Long literal displays are parsed element run by element run; the cut must never show in the output."""

import ast

import pytest

from codemods.api.prefilter import Prefilter
from codemods.api.registry import all_rules, select_rules
from codemods.model.imports import split_lines
from npu_migrate.apply import engine
from npu_migrate.apply.pieces import PieceMatch, plan_pieces

DEFAULT = engine.RuleSet(select_rules(all_rules()))


def _table(items: list[str], head: str = "ops = [\n", tail: str = "]\n", last: bool = False) -> str:
    """A 25-element table with `items` in its middle, or at its end."""
    filler = [f"    Info('op{i}', dtypes=(1, 2)),\n" for i in range(25)]
    middle = filler + items if last else filler[:12] + items + filler[12:]
    return "import torch\n\n" + head + "".join(middle) + tail


def _plan(text: str, pattern: str) -> list[tuple[int, int, str, bool, bool]]:
    lines = split_lines(text)
    match = PieceMatch(lines, Prefilter(pattern), lines, None)
    pieces = plan_pieces(lines, ast.parse(text).body, 1, len(lines) + 1, "", match)
    assert "".join("".join(lines[p.start - 1:p.end - 1]) for p in pieces) == text
    return [(p.start, p.end, p.indent, p.parse, p.part) for p in pieces]


def test_a_long_table_is_cut_at_its_elements_and_only_the_matching_run_parsed():
    text = _table(["    Info('sum', device_type='cuda',\n         skip=True),  # note\n"])
    plan = _plan(text, r"\bcuda\b")
    parsed = [p for p in plan if p[3]]
    assert parsed == [(16, 18, "    ", True, True)]
    assert plan[1] == (3, 4, "", False, False) and plan[-1] == (31, 32, "", False, False)
    assert all(part for *_, part in plan[2:-1])


@pytest.mark.parametrize("text", [
    _table([], head="ops = [  # device 'cuda' named in the head\n"),      # the head needs a rule
    _table(["    Info('a'), Info('b', device='cuda')]\n"], tail="", last=True),  # `]` after the last
    _table(["    'cuda',\n"]),                                         # a string item: maybe a docstring
    _table(["    *more_cuda\n"], last=True),                           # `*rest` alone is no statement
    _table(["    n := Info('cuda'),\n"]),                              # `n := x,` is no statement
])
def test_displays_that_cannot_be_cut_exactly_stay_whole(text):
    assert not any(part for *_, part in _plan(text, r"cuda"))


CASES = [
    _table(["    Info('sum', device_type='cuda', sample=lambda: torch.ones(2).cuda()),\n"]),
    _table(["    *cuda_extra_ops,\n", "    Info('x', dev=torch.device('cuda')),  # é ü\n"]),
    _table(["    Info('a'), Info('b', d='cuda:0'),\n", "    # torch.cuda.synchronize()\n"]),
    "def f():\n    table = (\n" + "".join(f"        Spec({i}),\n" for i in range(30))
    + "        Spec(x.cuda(), torch.cuda.current_device()),\n    )\n    return table\n",
    "import torch\nops = [\n" + "".join(f"Info({i}),\n" for i in range(30)) + "Info(torch.cuda.is_available()),\n]\n",
]


@pytest.mark.parametrize("text", CASES)
def test_cutting_a_table_changes_nothing_in_the_result(text):
    assert any(part for *_, part in _plan(text, "cuda"))
    cut = engine.migrate_text(text, "t.py", DEFAULT)
    whole = engine._migrate(text, "t.py", DEFAULT, nest=False)
    assert cut.parsed and not cut.error and (cut.edits or cut.diagnostics)
    assert cut.new_text == whole.new_text
    assert [(e.code, e.line, e.col) for e in cut.edits] == [(e.code, e.line, e.col) for e in whole.edits]
    assert [(d.code, d.line, d.col, d.message) for d in cut.diagnostics] == \
        [(d.code, d.line, d.col, d.message) for d in whole.diagnostics]

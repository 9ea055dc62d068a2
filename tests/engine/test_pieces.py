"""Long literal displays are parsed element run by element run; the cut must never show in the output."""

import ast

import pytest

from codemods.api.prefilter import Prefilter
from codemods.api.registry import all_rules, select_rules
from codemods.model.imports import split_lines
from npu_migrate.apply import engine
from npu_migrate.apply import pieces as P
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


# -- compound statements cut into their blocks ---------------------------------------------------
COMPOUND = ('import torch\n\nif flag:\n    a = 1\n    b = x.cuda()\nelif other:  # c\n    c = 2\nelse:\n'
            '    d = 3\n\ntry:\n    e = 4\nexcept ValueError:\n    f = y.cuda()\nfinally:\n    g = 5\n'
            'for i in r:\n    h = 6\nelse:\n    k = z.cuda()\nwith ctx:\n    m = 7\n')


def test_compound_statements_are_cut_at_their_headers_when_allowed():
    lines = split_lines(COMPOUND)
    every = PieceMatch(lines, Prefilter(r"\.cuda"), lines, None, P.cuttable_blocks(set()))
    pieces = plan_pieces(lines, ast.parse(COMPOUND).body, 1, len(lines) + 1, "", every)
    assert "".join("".join(lines[p.start - 1:p.end - 1]) for p in pieces) == COMPOUND
    parsed = ["".join(lines[p.start - 1:p.end - 1]).strip() for p in pieces if p.parse]
    assert parsed == ["b = x.cuda()", "f = y.cuda()", "k = z.cuda()"]
    kept = PieceMatch(lines, Prefilter(r"\.cuda"), lines, None, P.cuttable_blocks({"If", "For", "Try"}))
    whole = plan_pieces(lines, ast.parse(COMPOUND).body, 1, len(lines) + 1, "", kept)
    assert ["".join(lines[p.start - 1:p.end - 1]).split(":")[0] for p in whole if p.parse] == [
        "if flag", "try", "for i in r"]


def test_a_rule_that_visits_if_keeps_every_if_whole_and_idle_hooks_do_not_count():
    from codemods.api.runner import handled_nodes
    from codemods.rules.npu120_torch_cuda_api import TorchCudaApi
    from codemods.rules.npu511_cuda_only_branch import CudaOnlyBranch
    assert ast.If not in P.cuttable_blocks(handled_nodes([CudaOnlyBranch], "npu"))
    assert ast.If in P.cuttable_blocks(handled_nodes([TorchCudaApi], "npu"))  # its guards serve portable
    assert ast.If not in P.cuttable_blocks(handled_nodes([TorchCudaApi], "portable"))


BLOCK_CASES = [
    # a module-level `if` block is module-level code: the device constant is left to the flow rule
    "import torch\nif TEST_CUDA:\n    DEVICE_TYPE = 'cuda'\n    BACKEND = 'nccl'\nelif TEST_HPU:\n"
    "    DEVICE_TYPE = 'hpu:0'\nprint(DEVICE_TYPE)\n",
    "import torch\ntry:\n    import apex\nexcept ImportError:\n    apex = None\n\n"
    "with torch.no_grad():\n    y = x.cuda()\nfor i in range(2):\n    device = 'cuda'\n    z = w.to(device)\n",
    "import torch\ndef f(t):\n    if t is None:\n        return t\n    else:\n        dev = 'cuda:0'\n"
    "        return t.to(dev)\n",
]


@pytest.mark.parametrize("text", BLOCK_CASES)
@pytest.mark.parametrize("target", ["npu", "portable"])
def test_cutting_blocks_changes_nothing_in_the_result(text, target):
    rules = engine.RuleSet(select_rules(all_rules()), {"target": target})
    cut = engine.migrate_text(text, "t.py", rules)
    whole = engine._migrate(text, "t.py", rules, nest=False)
    assert cut.new_text == whole.new_text
    assert [(e.code, e.line, e.col) for e in cut.edits] == [(e.code, e.line, e.col) for e in whole.edits]
    assert [(d.code, d.line, d.col) for d in cut.diagnostics] == [(d.code, d.line, d.col) for d in whole.diagnostics]

"""Rule gates (`Rule.target_lines`): the engine drops a rule for a file where its gate finds no
target line, and hands it only the pieces that meet one. A gate may only leave out what the rule
could never act on: with every gate switched off, each rule says exactly the same."""

from __future__ import annotations

import pytest

from codemods.api.cases import cases_of
from codemods.api.registry import all_rules
from codemods.api.rule import Fix, LineSpans, Rule
from npu_migrate.apply.engine import RuleSet, migrate_text

from tests.rules.rule_cases import run_case


class _NameSeer(Rule):
    """Reports every name it is shown; its gate says where it may act."""

    code = "NPX990"
    name = "name-seer-for-test"
    summary = "reports names"
    fix = Fix.NONE
    prefilter = r"\bcuda\b"
    lines: list[tuple[int, int]] | None = None

    def target_lines(self):
        return self.lines

    def visit_Name(self, node):
        if node.value == "cuda":
            self.report(node, "seen")


SOURCE = "a = cuda\n\n\ndef f():\n    b = 1\n    c = cuda\n    return cuda\n\n\nd = cuda\n"


def _seen(lines):
    _NameSeer.lines = lines
    try:
        outcome = migrate_text(SOURCE, "g.py", RuleSet([_NameSeer]))
    finally:
        _NameSeer.lines = None
    return [d.line for d in outcome.diagnostics]


def test_no_gate_sees_every_piece_its_prefilter_matches():
    assert _seen(None) == [1, 6, 7, 10]


def test_an_empty_gate_drops_the_rule_for_the_file():
    assert _seen([]) == []


def test_a_gate_hands_over_only_the_pieces_that_meet_its_lines():
    assert _seen([(6, 6)]) == [6]  # the statement of a function body, not its neighbours
    assert _seen([(10, 10), (1, 1)]) == [1, 10]


def test_line_spans_merge_and_meet():
    spans = LineSpans([(10, 12), (3, 3), (4, 5), (11, 20)])
    assert spans.firsts == [3, 10] and spans.lasts == [5, 20]
    assert spans.meets(5, 6) and spans.meets(1, 4) and spans.meets(20, 30) and spans.meets(1, 100)
    assert not spans.meets(6, 10) and not spans.meets(21, 30) and not spans.meets(1, 3)
    assert not LineSpans([])


def _gated_rules() -> list[type[Rule]]:
    return [rule for rule in all_rules() if rule.language == "python" and rule.target_lines is not Rule.target_lines]


def _said(outcome):
    return (outcome.new_text, outcome.error, [(e.code, e.line, e.col, e.message) for e in outcome.edits],
            [(d.code, d.line, d.col, d.message) for d in outcome.diagnostics])


def _ungated(monkeypatch, rule):
    monkeypatch.setattr(rule, "target_lines", Rule.target_lines)


def test_gates_are_used():
    codes = {rule.code for rule in _gated_rules()}
    assert {"NPU130", "NPU152", "NPU153", "NPU156", "NPU175", "NPU177", "NPU308", "NPU316", "NPU511", "NPU523",
            "NPU525", "NPU530"} <= codes


@pytest.mark.parametrize("rule", _gated_rules(), ids=lambda rule: rule.code)
def test_a_gate_changes_nothing_its_rule_says_on_its_cases(rule, monkeypatch):
    cases = cases_of(rule)
    gated = [_said(run_case(rule.code, case, case.source)) for case in cases]
    _ungated(monkeypatch, rule)
    assert [_said(run_case(rule.code, case, case.source)) for case in cases] == gated


# targets reached the long way round: through an alias, an escape, a flag's spelling, `__import__`
REACHED = [
    ("NPU130", "from torch.cuda import amp as a\nwith a.autocast():\n    pass\n"),
    ("NPU130", "import torch as t\n\n\ndef f():\n    x = 1\n    with t.cuda.amp.autocast():\n        pass\n"),
    ("NPU130", "import torch as tt\n\n\ndef f():\n    y = 2\n    with tt.autocast('cuda'):\n        pass\n"),
    ("NPU130", "with __import__('torch').cuda.amp.autocast():\n    pass\n"),
    ("NPU525", "import torch as th\nfrom torch.distributed import all_reduce as ar\n\n\ndef f(d):\n"
               "    n = 1\n    t = th.zeros(2, dtype=th.double, device=d)\n    ar(t)\n"),
    ("NPU511", "import torch\nfrom torch.cuda import is_available as cuda_ok\n\n\ndef f(x):\n    y = 1\n"
               "    if cuda_ok():\n        x = x.to('cuda')\n    if torch.npu.is_available():\n        x = x.to('npu')\n"),
    ("NPU511", "import torch\n\n\ndef f(x):\n    y = 1\n    if __import__('torch').cuda.is_available():\n        return 1\n"
               "    elif torch.npu.is_available():\n        return 2\n"),
    ("NPU511", "from torch.library import custom_op as co\n\n\n@co('q::f', device_types='cuda')\ndef f(x):\n    pass\n"),
    ("NPU523", "f(quantize=1, **{'op\\x74im': 'paged_adamw_8bit'})\n"),  # `optim` is spelled by an escape
    ("NPU523", "p.add_argument('--half-precision-backend', default='apex', help='optim: o')\n"),
    ("NPU523", "from rwkv.model import RWKV\nmodel = RWKV('m.pth', 'cuda fp16')\n"),  # `strategy`, by position
    ("NPU308", "import triton as tr\n\n\n@tr.jit\ndef k(x):\n    pass\n"),
    ("NPU316", "import tilelang as tl\n\n\ndef f():\n    y = 1\n    return tl.compile(g, target='cuda')\n"),
    ("NPU175", "from torch import compile as c\n\n\ndef f(m):\n    y = 1\n    return c(m, backend='cudagraphs')\n"),
    ("NPU152", "from torch import load as L\n\n\ndef f(p):\n    y = 1\n    return L(p, map_location={'cuda:0': 'cpu'})\n"),
    ("NPU153", "import torch.nn as tnn\nm = tnn.DataParallel(m, device_ids=['cuda:0', 'cuda:1'])\n"),
    ("NPU530", "from unittest import mock as m\n\n\n@m.patch('torch.cuda.is_available', return_value=True)\n"
               "def test_a(x):\n    pass\n"),
    ("NPU530", "import torch as th\n\n\ndef test_b(monkeypatch):\n    y = 1\n"
               "    monkeypatch.setattr(th.cuda, 'is_available', lambda: True)\n"),
]


@pytest.mark.parametrize(("code", "source"), REACHED)
def test_a_gate_keeps_a_target_reached_through_an_alias(code, source, monkeypatch):
    rule = next(rule for rule in all_rules() if rule.code == code)
    gated = migrate_text(source, "t.py", RuleSet([rule]))
    assert any(item.code == code for item in [*gated.edits, *gated.diagnostics]), "the rule has a target here"
    _ungated(monkeypatch, rule)
    assert _said(migrate_text(source, "t.py", RuleSet([rule]))) == _said(gated)

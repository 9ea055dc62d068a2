"""The one harness for every rule's own examples: each `Valid`/`Invalid` case in a rule module's
`CASES` becomes a test, and every rule must carry cases and a docstring with the page sections."""

from __future__ import annotations

import pytest

from codemods.framework.cases import SECTIONS, TARGETS, Invalid, Valid, cases_of, doc_of, sections, targets_of
from codemods.framework.registry import builtin_rules
from rule_cases import run_case

RULES = builtin_rules()
CASES = [pytest.param(rule, case, id=f"{rule.code}-{type(case).__name__.lower()}-{index}")
         for rule in RULES for index, case in enumerate(cases_of(rule))]


def recorded(outcome) -> list[str]:
    return sorted({item.code for item in [*outcome.edits, *outcome.diagnostics]})


@pytest.mark.parametrize(("rule", "case"), CASES)
def test_case(rule, case: Valid | Invalid) -> None:
    outcome = run_case(rule.code, case, case.source)
    if isinstance(case, Valid):
        assert outcome.new_text is None, "a valid case must not change"
        assert rule.code not in recorded(outcome), "a valid case must get no word from the rule"
        return
    assert outcome.new_text == case.after
    assert recorded(outcome) == sorted(case.codes or (rule.code,))
    if case.after is not None:  # the rewrite is stable: running again changes nothing
        assert run_case(rule.code, case, case.after).new_text is None


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_every_rule_has_cases_and_a_page(rule) -> None:
    assert any(isinstance(case, Invalid) for case in cases_of(rule)), "no Invalid case"
    found = sections(doc_of(rule))
    assert [title for title in SECTIONS if title not in found] == []
    assert set(TARGETS) <= set(targets_of(rule))

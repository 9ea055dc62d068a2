"""The one harness for every rule's own examples: each `Valid`/`Invalid` case in a rule module's
`CASES` becomes a test, and every rule must carry cases and a docstring with the page sections."""

from __future__ import annotations

import re

import pytest
from rule_cases import migrate, run_case

from codemods.api.cases import SECTIONS, TARGETS, Invalid, Valid, cases_of, doc_of, sections, targets_of
from codemods.api.registry import builtin_rules

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
    if case.lines:
        assert [d.line for d in outcome.diagnostics if d.code == rule.code] == list(case.lines)
    if case.after is not None:  # the rewrite is stable: running again changes nothing
        assert run_case(rule.code, case, case.after).new_text is None


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_every_rule_has_cases_and_a_page(rule) -> None:
    assert any(isinstance(case, Invalid) for case in cases_of(rule)), "no Invalid case"
    found = sections(doc_of(rule))
    assert [title for title in SECTIONS if title not in found] == []
    assert set(TARGETS) <= set(targets_of(rule))


def _example_pairs(rule) -> list[tuple[str, str, str]]:
    """(before, after, path) of each block of the page's Example that shows both."""
    pairs = []
    for language, body in re.findall(r"```(\w*)\n(.*?)```", sections(doc_of(rule)).get("Example", ""), re.S):
        if not (re.search(r"^# before", body, re.M) and re.search(r"^# after", body, re.M)):
            continue
        before, after = re.split(r"^# after.*$", body, maxsplit=1, flags=re.M)
        after = re.split(r"^# after.*$", after, flags=re.M)[0]  # a second variant (other options) is not run
        pairs.append((re.sub(r"^# before.*\n", "", before, flags=re.M), after,
                      {"bash": "example.sh", "sh": "example.sh", "yaml": "example.yaml"}.get(language, "example.py")))
    return pairs


def _code_lines(text: str) -> list[str]:
    """The code of an example: no comments, blank lines or plain `import x` lines (the engine adds
    those where the file needs them; the page says so in words)."""
    lines = [re.sub(r"\s+#.*$", "", line).rstrip() for line in text.splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")
            and not re.fullmatch(r"import [\w.]+", line)]


EXAMPLES = [pytest.param(rule, before, after, path, id=f"{rule.code}-{index}")
            for rule in RULES for index, (before, after, path) in enumerate(_example_pairs(rule))]


@pytest.mark.parametrize(("rule", "before", "after", "path"), EXAMPLES)
def test_page_example_is_what_the_default_rules_do(rule, before, after, path) -> None:
    """A page's before/after example is what `apply` does to it with the default rules (and the
    rule itself when it is opt-in), up to comments and added imports: pages cannot drift."""
    header = "import os\nimport torch\nimport torch.distributed as dist\n" if path.endswith(".py") else ""
    codes = [r.code for r in RULES if r.default] + ([] if rule.default else [rule.code])
    outcome = migrate(header + before, codes, path)
    result = outcome.new_text if outcome.new_text is not None else header + before
    assert _code_lines(result) == _code_lines(header + after)


def test_case_texts_may_be_indented_inside_the_cases_list():
    from codemods.api.cases import Invalid, unindent

    case = Invalid("""\
    import torch

    x = 1
""", after="    import torch\n")
    assert case.source == "import torch\n\nx = 1\n" and case.after == "import torch\n"
    assert unindent("a = 1\n  b\n") == "a = 1\n  b\n"  # a text at column 0 is left as it is

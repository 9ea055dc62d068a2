"""NPU190 module-level device constants followed through the file; NPU191 other comparisons
with "cuda"."""

from __future__ import annotations

import pytest
from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent



KEPT = [  # (source, line of the assignment, line of the use that keeps it)
    # used as something that is no device: a path
    ('import os\nDEVICE = "cuda"\np = os.path.join("ckpt", DEVICE)\n', 2, 3),
    # compared with "cuda" under a name NPU104 does not know as a device
    ('ACCEL = "cuda"\nif ACCEL == "cuda":\n    pass\n', 1, 2),
    # passed positionally to a function that takes no device there
    ('DEVICE = "cuda"\nrun(DEVICE)\n', 1, 2),
]


# The before/after examples are the CASES of NPU190 and NPU191 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


@pytest.mark.parametrize("src,line,use", KEPT)
def test_kept_and_reported(src: str, line: int, use: int) -> None:
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU190", line)]
    assert f"line {use}:" in outcome.diagnostics[0].message and "by hand" in outcome.diagnostics[0].message


def test_assignment_in_a_class_body_is_not_a_module_constant() -> None:
    """The engine may parse a class body statement on its own: `device = "cuda"` there is
    NPU103's (a device-named assignment), never NPU190's."""
    src = 'import torch\n\n\nclass Cfg:\n    x = 1\n    other = "cuda"\n    y = 2\n'
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_decision_uses_the_whole_file_across_chunks() -> None:
    """The assignment and its uses sit in different top-level statements (chunks)."""
    src = ('import torch\n\nDEVICE = "cuda"\n\n\ndef build():\n    return Net().to(DEVICE)\n\n\n'
           'def save(m):\n    torch.save(m, "ckpt_" + DEVICE + ".pt")\n')
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU190", 3)]
    assert "line 11" in outcome.diagnostics[0].message



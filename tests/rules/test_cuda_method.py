"""NPU101 `.cuda()` -> `.npu()` and NPU102 `.is_cuda` -> `.is_npu`."""

import rule_cases

CODES = ["NPU101", "NPU102"]


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


# The before/after examples are the CASES of NPU101 and NPU102 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_edits_are_explained_with_positions():
    outcome = migrate("import torch\n\nx = a.cuda()\nif x.is_cuda:\n    pass\n")
    assert [(e.code, e.line, e.col) for e in outcome.edits] == [("NPU101", 3, 5), ("NPU102", 4, 4)]
    assert "`.cuda()` → `.npu()`" in outcome.edits[0].message


def test_torch_npu_import_is_added_with_the_default_rules():
    text = after("import torch\nx = torch.ones(2).cuda()\n", ["NPU100", "NPU101"])
    assert text == "import torch\nimport torch_npu  # noqa: F401\nx = torch.ones(2).npu()\n"


def test_own_cuda_method_is_reported_not_rewritten():
    src = ("class Wrapper:\n"
           "    def cuda(self):\n"
           "        self.model.cuda()\n"
           "        return self\n"
           "w = Wrapper().cuda()\n")
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU101", 3), ("NPU101", 5)]
    assert "defines its own `cuda` (line 2)" in outcome.diagnostics[0].message


def test_own_is_cuda_property_is_reported():
    src = "class T:\n    is_cuda = property(lambda self: True)\nprint(T().is_cuda)\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU102", 3)]


def test_suppression_comment_keeps_the_call():
    src = "x = t.cuda()  # npu-migrate: ignore[NPU101]\ny = t.cuda()\n"
    assert after(src) == "x = t.cuda()  # npu-migrate: ignore[NPU101]\ny = t.npu()\n"

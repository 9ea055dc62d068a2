"""NPU501-NPU503: `from torch import cuda`, `torch.cuda` as a value, the CUDA OOM exception."""

import rule_cases

CODES = ["NPU120", "NPU501", "NPU502", "NPU503"]
T = "import torch\n"


def after(src: str) -> str:
    return rule_cases.after(src, CODES)


# The before/after examples are the CASES of NPU120 and NPU501-NPU503 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_the_rewritten_import_never_keeps_a_cuda_alias():
    out = after("from torch import cuda\ncuda.synchronize()\n")
    assert "as cuda" not in out and "cuda" not in out


def test_npu_taken_keeps_npu120_alias():
    out = after("from torch import cuda\nnpu = 1\ncuda.synchronize()\n")
    assert out.startswith("from torch import npu as cuda\n")


def test_computed_name_is_reported():
    outcome = rule_cases.migrate(T + "def f(name):\n    return getattr(torch.cuda, name)\n", CODES)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU502", 3)]


def test_a_taken_npu_name_leaves_the_import_to_npu120():
    outcome = rule_cases.migrate("from torch import cuda\nnpu = 1\ncuda.synchronize()\n", ["NPU501", "NPU502", "NPU503"])
    assert outcome.new_text is None

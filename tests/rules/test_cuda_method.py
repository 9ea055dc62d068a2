"""NPU101 `.cuda()` -> `.npu()` and NPU102 `.is_cuda` -> `.is_npu`."""

import pytest
import rule_cases

CODES = ["NPU101", "NPU102"]


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


REWRITES = [
    ("x = t.cuda()\n", "x = t.npu()\n"),
    ("x = t.cuda(1, non_blocking=True)\n", "x = t.npu(1, non_blocking=True)\n"),
    ("x = t.cuda(device=dev)  # keep\n", "x = t.npu(device=dev)  # keep\n"),
    ("model = Net().cuda().eval()\n", "model = Net().npu().eval()\n"),
    ("y = torch.Tensor.cuda(x)\n", "y = torch.Tensor.npu(x)\n"),
    ("from models import net\nnet.cuda()\n", "from models import net\nnet.npu()\n"),
    ("batch = [b.cuda(\n    non_blocking=True) for b in batch]\n",
     "batch = [b.npu(\n    non_blocking=True) for b in batch]\n"),
    ("if x.is_cuda:\n    pass\n", "if x.is_npu:\n    pass\n"),
    ("ok = t.data.is_cuda and u.is_cuda\n", "ok = t.data.is_npu and u.is_npu\n"),
]

UNCHANGED = [
    "import torch\ntorch.cuda()\n",  # the module, not a method
    "import torch\ntorch.cuda.synchronize()\n",  # NPU120's business
    "import tvm\ndev = tvm.cuda(0)\n",  # a third-party module function
    "f = t.cuda\n",  # a reference, not a call
    "name = 'x.cuda()'  # .cuda() in a comment\n",
    "def f(is_cuda=False):\n    return is_cuda\n",
    "cuda(x)\n",
]


@pytest.mark.parametrize(("before", "expected"), REWRITES)
def test_rewrites(before, expected):
    assert after(before) == expected


@pytest.mark.parametrize("before", UNCHANGED)
def test_unchanged(before):
    outcome = migrate(before)
    assert outcome.new_text is None
    assert outcome.edits == []


@pytest.mark.parametrize(("before", "expected"), REWRITES)
def test_idempotent(before, expected):
    assert after(expected) == expected


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

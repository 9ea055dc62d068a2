"""NPU501-NPU503: `from torch import cuda`, `torch.cuda` as a value, the CUDA OOM exception."""

import pytest
import rule_cases

CODES = ["NPU120", "NPU501", "NPU502", "NPU503"]
T = "import torch\n"


def after(src: str) -> str:
    return rule_cases.after(src, CODES)


REWRITES = [
    ("from torch import cuda\ndef f():\n    cuda.synchronize()\n    return cuda.device_count()\n",
     "from torch import npu\ndef f():\n    npu.synchronize()\n    return npu.device_count()\n"),
    (T + "f = getattr(torch.cuda, 'synchronize')\n", T + "f = getattr(torch.npu, 'synchronize')\n"),
    (T + "ok = hasattr(torch.cuda, 'is_bf16_supported')\n", T + "ok = hasattr(torch.npu, 'is_bf16_supported')\n"),
    (T + "try:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass\n",
     T + "try:\n    pass\nexcept torch.OutOfMemoryError:\n    pass\n"),
    (T + "def f(e):\n    return isinstance(e, (torch.cuda.OutOfMemoryError, RuntimeError))\n",
     T + "def f(e):\n    return isinstance(e, (torch.OutOfMemoryError, RuntimeError))\n"),
]


@pytest.mark.parametrize("src,expected", REWRITES)
def test_rewrites(src, expected):
    assert after(src) == expected


def test_the_rewritten_import_never_keeps_a_cuda_alias():
    out = after("from torch import cuda\ncuda.synchronize()\n")
    assert "as cuda" not in out and "cuda" not in out


UNTOUCHED = [
    # `npu` is taken in this file: renaming the uses would clash (NPU120's `npu as cuda` stays)
    "from torch import cuda\nnpu = 1\ncuda.synchronize()\n",
    # a use torch.npu lacks keeps the whole alias on CUDA (NPU120 reports it)
    "from torch import cuda\ncuda.synchronize()\ncuda.jiterator\n",
    # another object's `cuda` attribute, and a plain string
    T + "def f(m):\n    return m.cuda.OutOfMemoryError, 'torch.cuda.OutOfMemoryError'\n",
    # getattr of another module
    T + "f = getattr(torch.nn, 'Linear')\n",
]


@pytest.mark.parametrize("src", UNTOUCHED)
def test_untouched_by_these_rules(src):
    outcome = rule_cases.migrate(src, ["NPU501", "NPU502", "NPU503"])
    assert outcome.new_text is None


def test_npu_taken_keeps_npu120_alias():
    out = after("from torch import cuda\nnpu = 1\ncuda.synchronize()\n")
    assert out.startswith("from torch import npu as cuda\n")


def test_computed_name_is_reported():
    outcome = rule_cases.migrate(T + "def f(name):\n    return getattr(torch.cuda, name)\n", CODES)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU502", 3)]

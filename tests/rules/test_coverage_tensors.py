"""NPU150 typed CUDA tensor classes, NPU151 type strings."""

from __future__ import annotations

import pytest
import torch
from rule_cases import codes_at, data, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU150", "NPU151"]

REWRITES = [
    ("import torch as th\nx = th.cuda.FloatTensor(3)\n",
     "import torch as th\nimport torch_npu  # noqa: F401\nx = th.npu.FloatTensor(3)\n"),
    ("import torch\nok = isinstance(x, (torch.cuda.LongTensor, torch.cuda.IntTensor))\n",
     "import torch\nimport torch_npu  # noqa: F401\nok = isinstance(x, (torch.npu.LongTensor, torch.npu.IntTensor))\n"),
    ("from torch.cuda import HalfTensor as HT\ny = HT(2)\n",
     "import torch_npu  # noqa: F401\nfrom torch_npu.npu import HalfTensor as HT\ny = HT(2)\n"),
    ("import torch\nz = x.type('torch.cuda.HalfTensor')\n",
     "import torch\nimport torch_npu  # noqa: F401\nz = x.type('torch.npu.HalfTensor')\n"),
    ('import torch\nz = x.type(dtype="torch.cuda.BFloat16Tensor")\n',
     'import torch\nimport torch_npu  # noqa: F401\nz = x.type(dtype="torch.npu.BFloat16Tensor")\n'),
    ('import torch\nif x.type() == "torch.cuda.FloatTensor":\n    pass\n',
     'import torch\nimport torch_npu  # noqa: F401\nif x.type() == "torch.npu.FloatTensor":\n    pass\n'),
    ('import torch\nif x.type() in ("torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"):\n    pass\n',
     'import torch\nimport torch_npu  # noqa: F401\nif x.type() in ("torch.npu.HalfTensor", "torch.npu.BFloat16Tensor"):\n    pass\n'),
]

UNCHANGED = [
    "import torch\nx = t.type(torch.float16)\n",
    "import torch\nlog('torch.cuda.FloatTensor is old')\n",  # only type positions are rewritten
    "import torch\nif name == 'torch.cuda.FloatTensor':\n    pass\n",  # not compared with .type()
    "import torch\nx = self.FloatTensor(3)\n",
    "x = FloatTensor(3)\n",  # not imported from torch.cuda
]


@pytest.mark.parametrize("before,expected", REWRITES)
def test_rewrites(before: str, expected: str) -> None:
    assert after(before, CODES) == expected
    assert_idempotent(before, CODES)


@pytest.mark.parametrize("src", UNCHANGED)
def test_unchanged(src: str) -> None:
    outcome = migrate(src, CODES)
    assert outcome.new_text is None and outcome.diagnostics == []


def test_double_tensor_kept_as_float64_with_a_warning() -> None:
    src = "import torch\nx = torch.cuda.DoubleTensor(3)\ny = x.type('torch.cuda.DoubleTensor')\n"
    outcome = migrate(src, CODES)
    assert "x = torch.npu.DoubleTensor(3)" in outcome.new_text
    assert "y = x.type('torch.npu.DoubleTensor')" in outcome.new_text
    assert codes_at(outcome) == [("NPU150", 2), ("NPU151", 3)]
    assert all("float64" in d.message and d.severity.value == "warning" for d in outcome.diagnostics)


def test_double_tensor_from_import_also_warns() -> None:
    outcome = migrate("from torch.cuda import DoubleTensor\nx = DoubleTensor(2)\n", CODES)
    assert "from torch_npu.npu import DoubleTensor" in outcome.new_text
    assert codes_at(outcome) == [("NPU150", 1)]


@pytest.mark.parametrize("entry", data("coverage_tensors.json")["entries"], ids=lambda e: f"{e['code']}-{e['cuda']}")
def test_every_type_string_and_class(entry: dict) -> None:
    if entry["code"] == "NPU151":
        src = f"import torch\ny = x.type('{entry['cuda']}')\n"
        assert f"y = x.type('{entry['npu']}')" in after(src, CODES)
    else:
        assert f"x = {entry['npu']}\n" in after(f"import torch\nx = {entry['cuda']}\n", CODES)


def test_type_strings_are_what_cpu_torch_prints() -> None:
    """The CUDA spelling of the strings matches what torch itself uses for a CPU tensor,
    with the backend segment replaced (torch.FloatTensor <-> torch.cuda.FloatTensor)."""
    for entry in data("coverage_tensors.json")["entries"]:
        if entry["code"] == "NPU151":
            dtype_name = entry["cuda"].rsplit(".", 1)[1]
            assert getattr(torch, dtype_name)(1).type() == f"torch.{dtype_name}"


def test_mixed_import_is_split_between_npu120_and_npu150() -> None:
    """`from torch.cuda import FloatTensor, synchronize`: NPU120 owns synchronize, NPU150 the class."""
    src = "import torch\nfrom torch.cuda import FloatTensor, synchronize\nsynchronize()\nx = FloatTensor(2)\n"
    text = after(src, ["NPU120", "NPU150"])
    assert "from torch.npu import synchronize" in text
    assert "from torch_npu.npu import FloatTensor" in text
    assert "torch.cuda" not in text
    assert_idempotent(src, ["NPU120", "NPU150"])

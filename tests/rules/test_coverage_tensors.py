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


# The before/after examples are the CASES of NPU150 and NPU151 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


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

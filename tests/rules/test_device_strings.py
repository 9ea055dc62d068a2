"""NPU103 device strings in device positions, NPU104 device comparisons, NPU105 argparse."""

import json

import pytest
import rule_cases

from codemods.analyses.devices import device_positions, load_positions

CODES = ["NPU103", "NPU104", "NPU105"]
T = "import torch\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


# The before/after examples are the CASES of NPU103-NPU105 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


@pytest.mark.parametrize("src", [
    'x = t.to(device="cuda,cpu")\n',
    'x = torch.zeros(1, device="cuda:0,1")\n',
    'x = torch.zeros(1, device=f"cuda:{a}:{b}")\n',
])
def test_doubtful_device_strings_are_reported_not_rewritten(src):
    outcome = migrate("import torch\n" + src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU103", 2)]
    assert "port it by hand" in outcome.diagnostics[0].message


def test_edit_codes_lines_and_messages():
    src = ('import torch\n'
           'x = torch.ones(2, device="cuda")\n'
           'if x.device.type == "cuda":\n'
           '    parser.add_argument("--device", default="cuda")\n')
    outcome = migrate(src)
    assert [(e.code, e.line) for e in outcome.edits] == [("NPU103", 2), ("NPU104", 3), ("NPU105", 4)]
    assert outcome.edits[0].message == '`"cuda"` → `"npu"` (`device=` of `torch.ones()`)'


def test_f_string_and_conditional_in_one_call_get_one_edit_each():
    src = T + 'd = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    outcome = migrate(src)
    assert len(outcome.edits) == 1


def test_positions_files_are_merged(tmp_path):
    (tmp_path / "device_positions.json").write_text(json.dumps(
        {"keywords": ["device"], "functions": {"torch.device": {"positions": [0]}},
         "methods": {"to": [0]}, "names": ["device"]}))
    (tmp_path / "device_positions_extra.json").write_text(json.dumps(
        {"keywords": ["output_device"], "functions": {"torch.device": {"keywords": ["type"]},
                                                      "a.b": {"positions": [2]}},
         "methods": {"to": [1]}, "skip_functions": ["x.y"]}))
    table = load_positions(sorted(tmp_path.glob("device_positions*.json")))
    assert table.keywords == {"device", "output_device"}
    assert table.functions["torch.device"] == ({0}, {"type"})
    assert table.functions["a.b"] == ({2}, frozenset())
    assert table.methods["to"] == {0, 1}
    assert table.skip_functions == {"x.y"}


def test_shipped_positions_cover_the_amp_calls_the_amp_rule_owns():
    from codemods.rules.npu130_amp_device import amp_table

    assert set(amp_table().generic) <= device_positions().skip_functions


def test_prefilter_skips_files_without_device_strings():
    outcome = migrate("x = t.cuda()\nprint('cuda_model')\n")
    assert outcome.parsed is False


def test_statements_of_a_function_keep_their_indentation():
    """Untouched statements next to rewritten ones in a function body come back verbatim."""
    src = ("import torch\n"
           "def pick(rank):\n"
           "    device = 'cuda:0'\n"
           "    other = 'cuda'\n"
           "    return torch.device(device), other\n")
    assert after(src) == src.replace("'cuda:0'", "'npu:0'")


def test_a_choice_between_cuda_and_cpu_is_a_device():
    """nanoGPT's `device_type = 'cuda' if 'cuda' in device else 'cpu'`, later given to autocast."""
    src = ("import torch\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n"
           "x = 'cpu' if device != 'cuda:1' else 'cuda:1'\nlabel = 'cuda' if 'cuda' in d else 'slow'\n")
    out = after(src, codes=["NPU103", "NPU104"])
    assert out.splitlines()[1:] == ["device_type = 'npu' if 'npu' in device else 'cpu'",
                                    "x = 'cpu' if device != 'npu:1' else 'npu:1'",
                                    "label = 'cuda' if 'cuda' in d else 'slow'"]
    assert after(out, codes=["NPU103", "NPU104"]) == out

"""NPU140-NPU143: torch.distributed on HCCL."""


import pytest
import rule_cases

from codemods.data.tables import load_data
from codemods.families.distributed import DATA, dist_table
from codemods.rules.npu140_nccl_backend import backend_text

CODES = ["NPU140", "NPU141", "NPU142", "NPU143"]
D = "import torch.distributed as dist\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


# The before/after examples are the CASES of NPU140-NPU143 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


@pytest.mark.parametrize(("text", "expected"), [
    ("nccl", "hccl"), ("NCCL", "HCCL"), ("cuda:nccl", "npu:hccl"),
    ("cuda:nccl,cpu:gloo", "npu:hccl,cpu:gloo"), ("cpu:gloo, cuda:nccl", "cpu:gloo, npu:hccl"),
    ("gloo", None), ("Nccl", None), ("nccl2", None), ("cuda:nccl;cpu:gloo", None), ("", None),
])
def test_backend_text(text, expected):
    assert backend_text(text, dist_table()) == expected


def test_unknown_backend_string_in_a_backend_position_is_reported():
    outcome = migrate(D + 'dist.init_process_group(backend="nccl+sharp")\n')
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU140", 2)]


def test_process_group_nccl_is_reported():
    outcome = migrate(D + "opts = dist.ProcessGroupNCCL.Options()\n"
                      "from torch.distributed import ProcessGroupNCCL\n")
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU143", 2), ("NPU143", 3)]
    assert "ProcessGroupHCCL" in outcome.diagnostics[0].message


def test_edit_messages():
    outcome = migrate(D + 'dist.init_process_group("nccl")\nb = dist.Backend.NCCL\n')
    assert [(e.code, e.line, e.message) for e in outcome.edits] == [
        ("NPU140", 2, '`"nccl"` → `"hccl"` (the backend argument)'),
        ("NPU141", 3, "`dist.Backend.NCCL` → `dist.Backend.HCCL`"),
    ]


def test_table_follows_the_coverage_schema():
    data = load_data(DATA)
    for entry in data["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["code"] in CODES

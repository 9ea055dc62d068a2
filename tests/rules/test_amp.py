"""NPU130: CUDA AMP becomes the device-generic torch.amp API with "npu"."""


import rule_cases

from codemods.data.tables import load_data
from codemods.rules.npu130_amp_device import DATA

CODES = ["NPU130"]
T = "import torch\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


# the before/after examples are NPU130's CASES (codemods/rules/npu130_amp_device.py, run by
# test_rule_cases.py and shown on its page); these tests check what a case cannot.


def test_imported_name_used_without_a_call_blocks_the_move_and_is_reported():
    src = ("from torch.cuda.amp import autocast\n"
           "ctx = autocast if use_amp else nullcontext\n"
           "with autocast():\n"
           "    pass\n")
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]
    assert "line 2" in outcome.diagnostics[0].message


def test_alias_the_migration_cannot_follow_is_reported():
    """`ac(...)` calls hold no AMP word, so their statements are never parsed: moving the
    import would leave them without a device."""
    src = "from torch.cuda.amp import autocast as ac\n\n\ndef f():\n    with ac():\n        pass\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]
    assert "`ac`" in outcome.diagnostics[0].message


def test_module_alias_with_other_members_is_reported():
    outcome = migrate("from torch.cuda import amp\nm = amp.common.amp_definitely_not_available()\n")
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]


def test_spelled_out_reference_is_reported():
    outcome = migrate(T + "ctx = torch.cuda.amp.autocast\nwith torch.cuda.amp.autocast():\n    pass\n")
    assert outcome.new_text == T + 'ctx = torch.cuda.amp.autocast\nwith torch.amp.autocast("npu"):\n    pass\n'
    assert [(d.code, d.line, d.col) for d in outcome.diagnostics] == [("NPU130", 2, 7)]


def test_star_args_of_autocast_are_reported():
    outcome = migrate(T + "with torch.cuda.amp.autocast(*flags):\n    pass\n")
    assert outcome.new_text is None
    assert "by hand" in outcome.diagnostics[0].message


def test_amp_table_follows_the_coverage_schema():
    data = load_data(DATA)
    for entry in data["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["code"] == "NPU130"

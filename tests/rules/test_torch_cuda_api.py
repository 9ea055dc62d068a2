"""NPU120 torch.cuda.X -> torch.npu.X and NPU121 names without an NPU counterpart."""

import re
from pathlib import Path

import pytest
import rule_cases

from codemods.data.tables import load_data
from codemods.families.torch_cuda_api import DATA, cuda_names

CODES = ["NPU120", "NPU121"]
T = "import torch\n"
REPO = Path(__file__).resolve().parents[2]
# sections 2.1 and 2.6 of the fact sheet, shipped with the tests (the fact sheet itself is in the
# workplace's ../shared, which a clone does not have)
EXCERPT = REPO / "fixtures" / "reference" / "torch_npu_namespace.md"
FACT_SHEET = REPO.parent / "shared" / "reference" / "torch_npu_api.md"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


# The before/after examples are the CASES of NPU120 and NPU121 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_mixed_import_never_imports_a_missing_name_and_flags_the_rest():
    outcome = migrate("from torch.cuda import synchronize, get_arch_list, is_tf32_supported\n")
    assert outcome.new_text == ("from torch.cuda import get_arch_list, is_tf32_supported; "
                                "from torch.npu import synchronize\n")
    codes = [(d.code, d.line) for d in outcome.diagnostics]
    assert codes == [("NPU121", 1), ("NPU121", 1)]
    assert "HF32" in outcome.diagnostics[1].message


def test_no_counterpart_is_flagged_at_the_use():
    outcome = migrate(T + "archs = torch.cuda.get_arch_list()\nt = torch.cuda.temperature()\n")
    assert outcome.new_text is None
    assert [(d.code, d.line, d.col) for d in outcome.diagnostics] == [("NPU121", 2, 9), ("NPU121", 3, 5)]
    assert "npu-smi" in outcome.diagnostics[1].message
    assert outcome.diagnostics[0].format().endswith("(npu-migrate rules NPU121)")


def test_module_alias_used_for_a_missing_name_stays_and_is_reported():
    src = "import torch.cuda as tc\ntc.synchronize()\nprint(tc.get_arch_list())\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU120", 1)]
    assert "get_arch_list" in outcome.diagnostics[0].message


def test_module_alias_passed_around_is_not_repointed():
    outcome = migrate("from torch import cuda\ncuda.synchronize()\nregister(cuda)\n")
    assert outcome.new_text is None
    assert "the module itself" in outcome.diagnostics[0].message


def test_torch_npu_import_is_added_before_a_from_import():
    text = after("from torch.cuda import synchronize\nsynchronize()\n", ["NPU100", "NPU120"])
    assert text == ("import torch_npu  # noqa: F401\nfrom torch.npu import synchronize\nsynchronize()\n")


def test_edits_name_both_apis():
    outcome = migrate(T + "torch.cuda.empty_cache()\n")
    assert [(e.code, e.line, e.col, e.message) for e in outcome.edits] == [
        ("NPU120", 2, 1, "`torch.cuda.empty_cache` → `torch.npu.empty_cache`")]


# -- the name table ------------------------------------------------------------------------------

def _table():
    return load_data(DATA)


def test_table_holds_the_142_names_of_torch_npu_npu_all():
    names = [n for group in _table()["torch_npu_npu_all"].values() for n in group]
    assert len(names) == len(set(names)) == 142


def test_every_npu_name_is_rewritten_or_owned_elsewhere():
    data = _table()
    names = {n for group in data["torch_npu_npu_all"].values() for n in group}
    rewritten = {e["npu"].removeprefix("torch.npu.") for e in data["entries"] if e["action"] == "rewrite"}
    excluded = set(data["excluded_from_rewrite"])
    assert names - excluded <= rewritten
    assert not excluded & set(cuda_names().rewrites)
    extra = rewritten - names  # submodules and module attributes outside __all__, each with a note
    assert extra == {"default_generators", "random", "streams"}


def test_entries_follow_the_coverage_schema():
    for entry in _table()["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["action"] in ("rewrite", "flag", "none")
        assert entry["code"] in ("NPU120", "NPU121")
        assert (entry["npu"] is None) == (entry["action"] == "flag")
        if entry["action"] == "flag":
            assert entry["note"].startswith("no NPU")


def test_names_match_the_fact_sheet():
    text = EXCERPT.read_text(encoding="utf-8")
    if FACT_SHEET.exists():  # the excerpt is still what the fact sheet says
        sheet = FACT_SHEET.read_text(encoding="utf-8")
        for start, end in (("### 2.1", "### 2.2"), ("### 2.6", "## 3.")):
            assert sheet[sheet.index(start):sheet.index(end)] in text
    section = text[text.index("### 2.1"):text.index("### 2.2")]
    words = set(re.findall(r"\w+", section))
    for prefix, first, rest in re.findall(r"(\w+_)([A-Za-z]+)((?:/[A-Za-z]+)+)", section):
        words.update(prefix + part for part in [first, *rest.strip("/").split("/")])  # x_begin/end
    for name in (n for group in _table()["torch_npu_npu_all"].values() for n in group):
        if not name.endswith(("Storage", "Tensor")):  # listed there as "Bool/Byte/... Storage and Tensor"
            assert name in words, name
    no_counterpart = text[text.index("### 2.6"):text.index("## 3.")]
    for name, note in cuda_names().flags.items():
        if "torch 2.13 name" not in note:
            assert name in no_counterpart, name


def test_flagged_and_rewritten_names_exist_upstream_or_are_npu_only():
    torch = pytest.importorskip("torch")
    upstream = set(torch.cuda.__all__)
    for name in cuda_names().flags:
        assert name in upstream or name == "profiler", name
    for entry in _table()["entries"]:
        name = entry["cuda"].removeprefix("torch.cuda.")
        if entry["action"] == "rewrite" and name not in upstream:
            assert "NPU-only" in entry.get("note", ""), name


def test_split_import_keeps_comments_and_parentheses():
    src = "from torch.cuda import (\n    synchronize,  # sync\n    get_arch_list,\n    Stream\n)\n"
    out = after(src)
    namespace = {}
    compile(out, "t.py", "exec")  # valid Python
    assert out == ("from torch.cuda import get_arch_list; "
                   "from torch.npu import (\n    synchronize,  # sync\n    Stream\n)\n")
    assert after(out) == out
    assert namespace == {}


def test_split_import_whose_remaining_names_carry_comments_is_reported():
    src = "from torch.cuda import (\n    synchronize,\n    get_arch_list,  # arch\n)\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert ("NPU120", 1) in [(d.code, d.line) for d in outcome.diagnostics]

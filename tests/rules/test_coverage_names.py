"""Every qualified-name entry of the coverage data files (NPU150-NPU177): rewritten where the
data says rewrite, reported where it says flag, through `torch.` and through `from ... import`."""

from __future__ import annotations

import importlib

import pytest
from rule_cases import NAME_FILES, codes_at, data, for_codes, name_entries

from codemods.data.tables import DATA

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

ENTRIES = name_entries()
REWRITES = [(f, e) for f, e in ENTRIES if e["action"] == "rewrite"]
FLAGS = [(f, e) for f, e in ENTRIES if e["action"] == "flag"]


def _id(item: tuple[str, dict]) -> str:
    return item[1]["cuda"]


def _expected_expression(npu: str) -> str:
    """What a use spelled from `import torch` becomes."""
    return npu  # torch.npu.* stays spelled from `torch`; torch_npu.* gets `import torch_npu`


@pytest.mark.parametrize("item", REWRITES, ids=_id)
def test_rewrite_through_torch(item: tuple[str, dict]) -> None:
    _, entry = item
    src = f"import torch\n\nvalue = {entry['cuda']}\n"
    outcome = migrate(src, [entry["code"]])
    text = outcome.new_text
    assert text is not None, entry
    assert f"value = {_expected_expression(entry['npu'])}\n" in text
    if entry["npu"].startswith("torch_npu.") or entry["npu"].startswith("torch.npu."):
        assert "import torch_npu" in text
    assert [e.code for e in outcome.edits if e.code != "NPU100"] == [entry["code"]]
    if entry.get("message"):
        assert [(d.code, d.message) for d in outcome.diagnostics] == [(entry["code"], entry["message"])]
    else:
        assert outcome.diagnostics == []
    assert_idempotent(src, [entry["code"]])


@pytest.mark.parametrize("item", REWRITES, ids=_id)
def test_rewrite_through_from_import(item: tuple[str, dict]) -> None:
    file, entry = item
    module, _, name = entry["cuda"].rpartition(".")
    if module == "torch":
        pytest.fail("coverage names are never top-level torch attributes")
    src = f"from {module} import {name}\n\nvalue = {name}\n"
    outcome = migrate(src, [entry["code"]])
    new_module, _, new_name = entry["npu"].replace("torch.npu.", "torch_npu.npu.", 1).rpartition(".")
    if new_module in data(file).get("npu_modules", ()):
        alias = f" as {name}" if new_name != name else ""
        assert outcome.new_text is not None
        assert f"from {new_module} import {new_name}{alias}\n" in outcome.new_text
        assert outcome.new_text.endswith(f"\nvalue = {name}\n")  # the use keeps its local name
    else:  # e.g. a member of a class: cannot be imported by name, so it is reported
        assert outcome.new_text is None
        assert codes_at(outcome) == [(entry["code"], 1)]
    assert_idempotent(src, [entry["code"]])


@pytest.mark.parametrize("item", FLAGS, ids=_id)
def test_flag(item: tuple[str, dict]) -> None:
    _, entry = item
    src = f"import torch\n\nvalue = {entry['cuda']}\n"
    outcome = migrate(src, [entry["code"]])
    assert outcome.new_text is None
    assert [(d.code, d.line, d.message) for d in outcome.diagnostics] == [(entry["code"], 3, entry["message"])]


@pytest.mark.parametrize("item", ENTRIES, ids=_id)
def test_cuda_side_exists_in_torch(item: tuple[str, dict]) -> None:
    """The data names real torch APIs (a typo would make an entry dead)."""
    parts = item[1]["cuda"].split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            obj = getattr(obj, part)
        return
    pytest.fail(f"{item[1]['cuda']} does not resolve")


def test_entries_have_the_coverage_schema() -> None:
    for file in ("coverage_tensors.json", "coverage_memory.json", "coverage_backends.json",
                 "coverage_profiler.json", "coverage_graphs.json", "coverage_devices.json",
                 "device_positions_extra.json"):
        for entry in data(file)["entries"]:
            assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys(), (file, entry)
            assert entry["action"] in ("rewrite", "flag", "none")
            assert entry["code"].startswith("NPU1")
            if entry["action"] == "flag" and entry.get("match", "name") == "name" and "code" in entry \
                    and file != "coverage_devices.json":
                assert entry.get("message"), entry  # a flag says what to do instead


def test_unchanged_when_the_name_is_not_torch() -> None:
    """A chain that only looks like a torch name (an unrelated object) is left alone."""
    src = ("class Cfg:\n    pass\n\ncfg = Cfg()\nx = cfg.backends.cuda.matmul.allow_tf32\n"
           "y = self.FloatTensor\nz = nvtx.range_push('a')\n")
    outcome = migrate(src, ["NPU150", "NPU160", "NPU170"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_after_helper_parses() -> None:
    assert after("import torch\nx = torch.cuda.FloatTensor\n", ["NPU150"]).endswith(
        "x = torch.npu.FloatTensor\n")


def test_every_coverage_data_file_is_read_by_these_tests() -> None:
    """A new coverage_*.json must be added to NAME_FILES (or be a call-only file)."""
    call_only = {"coverage_devices.json"}
    assert {p.name for p in DATA.glob("coverage_*.json")} == set(NAME_FILES) | call_only

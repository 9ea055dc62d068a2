"""docs/coverage.md: generated from every codemods/data/*.json with `entries`; every row names a
registered rule (or says nothing is needed), and the committed document is up to date."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.api.registry import all_rules
from codemods.docgen import coverage

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "coverage.md"


def test_every_data_entry_has_a_registered_rule() -> None:
    assert coverage.problems() == []


def test_problems_catch_an_unregistered_code_and_a_missing_code(tmp_path, monkeypatch) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"entries": [
        {"cuda": "torch.cuda.foo", "npu": "torch.npu.foo", "action": "rewrite", "code": "NPU999",
         "transfer_to_npu": "alias"},
        {"cuda": "torch.cuda.bar", "npu": None, "action": "flag", "transfer_to_npu": "—"},
        {"cuda": "torch.cuda.baz", "npu": "same", "action": "none", "transfer_to_npu": "—"},
    ]}))
    (tmp_path / "y.json").write_text(json.dumps({"entries": [
        {"cuda": "torch.cuda.qux", "action": "maybe", "code": "NPU101"},
    ]}))
    monkeypatch.setattr(coverage, "DATA", tmp_path)
    found = coverage.problems({"NPU101"})
    assert found == [
        "x.json: no schema in codemods/data/tables.py SCHEMAS",
        "y.json: no schema in codemods/data/tables.py SCHEMAS",
        f"{tmp_path / 'y.json'}: entries[0]: missing key 'transfer_to_npu' (and 1 more)",
        "x.json: 'torch.cuda.foo': code NPU999 is not a registered rule",
        "x.json: 'torch.cuda.bar': action 'flag' without a rule code",
    ]


def test_one_row_per_entry_with_action_and_codes() -> None:
    text = coverage.render()
    entries = [e for _, data in coverage.data_files() for e in data["entries"]]
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| CUDA side")]
    assert len(table_rows) == len(entries)
    assert "| `CUDA_VISIBLE_DEVICES` | `ASCEND_RT_VISIBLE_DEVICES` | rewrite (NPU201; shell NPU251) | — |" in text
    assert "| `flash_attn.flash_attn_func` |" in text and "diagnostic (NPU305)" in text
    registered = {rule.code for rule in all_rules(plugins=False)}
    for code in {e["code"] for e in entries if e.get("code")}:
        assert code in registered


def test_rendering_is_stable() -> None:
    assert coverage.render() == coverage.render()


def test_document_is_up_to_date() -> None:
    # regenerated from whatever data exists now: a data change without regeneration fails here
    if not DOC.exists():
        pytest.fail("docs/coverage.md is missing: run `python -m codemods.docgen.coverage`")
    assert DOC.read_text(encoding="utf-8") == coverage.render(), (
        "docs/coverage.md is stale: run `python -m codemods.docgen.coverage`")


def test_cli_check_and_write(tmp_path, capsys) -> None:
    out = tmp_path / "coverage.md"
    assert coverage.main(["--check", "--output", str(out)]) == 1
    assert "stale" in capsys.readouterr().err
    # the documented command, as a user runs it
    wrote = subprocess.run([sys.executable, "-m", "codemods.docgen.coverage", "--output", str(out)],
                           capture_output=True, text=True)
    assert wrote.returncode == 0, wrote.stderr
    assert out.read_text(encoding="utf-8") == coverage.render()
    assert coverage.main(["--check", "--output", str(out)]) == 0
    out.write_text(out.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert coverage.main(["--check", "--output", str(out)]) == 1

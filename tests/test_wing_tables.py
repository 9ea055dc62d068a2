"""The wings' data tables (`npu_migrate/<wing>/data_tables.py`) go through core's one loader:
every shipped table matches its schema, a broken one is one line naming the file and the field,
and a JSON file no schema declares is reported by `python -m npu_migrate.commands.tables --check`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from npu_migrate.analyze import catalog
from npu_migrate.analyze.data_tables import TABLES as ANALYZE
from npu_migrate.commands import tables as check
from npu_migrate.core.tables import DataError, TableSet
from npu_migrate.verify.thresholds import ThresholdPolicy


def test_every_shipped_table_matches_its_schema_and_none_is_undeclared() -> None:
    assert check.problems() == []
    assert set(check.wing_tables()) >= {"analyze", "memory", "verify", "emulation"}


def test_the_check_command_passes_on_the_shipped_tables() -> None:
    done = subprocess.run([sys.executable, "-m", "npu_migrate.commands.tables", "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tables OK" in done.stdout


def _copy_of_analyze(tmp_path) -> TableSet:
    folder = tmp_path / "data"
    shutil.copytree(ANALYZE.folder, folder)
    return TableSet(folder, ANALYZE.schemas, "analyze-copy")


def test_a_broken_wing_table_is_one_line_naming_file_and_field(tmp_path) -> None:
    copy = _copy_of_analyze(tmp_path)
    rating = json.loads((copy.folder / "rating.json").read_text(encoding="utf-8"))
    rating["categories"]["rewritten"]["weight"] = "heavy"
    (copy.folder / "rating.json").write_text(json.dumps(rating), encoding="utf-8")
    with pytest.raises(DataError) as error:
        copy.load("rating.json")
    message = str(error.value)
    assert message.startswith("analyze-copy/rating.json: categories.rewritten.weight: expected")
    assert "\n" not in message
    assert copy.problems() == [message]


def test_a_table_without_schema_and_a_missing_table_are_problems(tmp_path) -> None:
    copy = _copy_of_analyze(tmp_path)
    (copy.folder / "extra.json").write_text("{}", encoding="utf-8")
    (copy.folder / "fusion.json").unlink()
    found = copy.problems()
    assert "analyze-copy/extra.json: no schema for this table" in found
    assert any(p.startswith("analyze-copy/fusion.json: cannot read") for p in found)
    with pytest.raises(DataError, match="no schema"):
        copy.load("extra.json")


def test_the_analyzer_reads_its_tables_through_the_checked_loader() -> None:
    assert catalog.load("fusion") is ANALYZE.load("fusion.json")
    assert catalog.load("rating")["categories"]


def test_a_user_thresholds_file_off_schema_names_file_and_field(tmp_path) -> None:
    path = tmp_path / "thresholds.json"
    path.write_text('{"amp": {"cosine_min": "high"}}', encoding="utf-8")
    with pytest.raises(ValueError) as error:
        ThresholdPolicy.load(path=str(path))
    assert str(error.value).startswith(f"{path}: amp.cosine_min: expected")
    path.write_text('{"amp": {"cosine": 0.5}}', encoding="utf-8")
    with pytest.raises(ValueError, match="unknown key 'cosine'"):
        ThresholdPolicy.load(path=str(path))

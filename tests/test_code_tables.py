"""The code families (ANA, MEM, VER, the engine's NPU0xx) are one table each (`codes.toml`, read
through core's one loader, `npu_migrate/core/codes.py`): every shipped table is on its schema and
renders the committed page of each code; a malformed entry (a missing field, a code twice, a code of
another family, a template without its fields) is refused with one line naming the file and the
entry (by the loader here; by the commands in tests/workflow/test_workflow_rules_cmd.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_migrate.analyze.data_tables import TABLES as ANALYZE
from npu_migrate.apply.data_tables import TABLES as APPLY
from npu_migrate.core.codes import CODE_TABLE, entries, pages
from npu_migrate.core.diagnostics import Severity
from npu_migrate.core.tables import DataError, TableSet
from npu_migrate.memory.data_tables import TABLES as MEMORY
from npu_migrate.verify.data_tables import TABLES as VERIFY

REPO = Path(__file__).resolve().parents[1]
FAMILIES = {"ANA": ANALYZE, "MEM": MEMORY, "VER": VERIFY, "NPU0": APPLY}


def _copy(tables: TableSet, tmp_path: Path, edit) -> TableSet:
    """The family's table in a folder of its own, with `edit` applied to its text."""
    folder = tmp_path / "data"
    folder.mkdir(parents=True)
    text = (tables.folder / CODE_TABLE).read_text(encoding="utf-8")
    (folder / CODE_TABLE).write_text(edit(text), encoding="utf-8")
    return TableSet(folder, {CODE_TABLE: tables.schemas[CODE_TABLE]}, "copy")


def _refusal(tables: TableSet) -> str:
    with pytest.raises(DataError) as error:
        pages(tables)
    message = str(error.value)
    assert "\n" not in message and tables.problems() == [message]
    return message


@pytest.mark.parametrize("prefix", sorted(FAMILIES))
def test_each_family_renders_the_committed_pages(prefix):
    rendered = pages(FAMILIES[prefix])
    assert rendered and all(code.startswith(prefix) for code in rendered)
    for code, page in rendered.items():
        committed = REPO / "docs" / "rules" / f"{code}.md"
        assert committed.read_text(encoding="utf-8") == page, code
        for section in ("## What it means", "## Why", "## Evidence", "## What to do"):
            assert f"\n{section}\n" in page, (code, section)


def test_a_template_page_is_the_template_with_the_entry_fields():
    tuning = pages(ANALYZE)["ANA049"]
    assert "tuning in the memory section of `npu-migrate analyze`: static shapes" in tuning
    assert "ANA049 static shapes: added `drop_last=True`" in tuning
    assert "$" not in tuning and "computation section" not in tuning


def test_a_page_states_the_severity_of_its_entry(tmp_path):
    """The `finding` template names the entry's own severity: the page cannot say another."""
    assert "needs a person: no rule of `npu-migrate apply` rewrites or reports the line (or its statement). " \
           "Severity: warning." in pages(ANALYZE)["ANA002"]
    copy = _copy(ANALYZE, tmp_path, lambda text: text.replace('severity = "warning"', 'severity = "info"', 1))
    assert entries(copy)["ANA002"]["severity"] == "info"
    assert "Severity: info. Reported by" in pages(copy)["ANA002"]


def test_the_engine_reports_its_codes_with_the_tables_severity(tmp_path):
    from npu_migrate.apply.engine import unknown_suppressions

    severity = {code: Severity(entry["severity"]) for code, entry in entries(APPLY).items()}
    found = unknown_suppressions("x = 1  # npu-migrate: ignore[NPU1O1]\ny = 2  # npu-migrate: ignore[]\n", "a.py")
    assert [d.code for d in found] == ["NPU001", "NPU002"]
    assert all(d.severity == severity[d.code] for d in found)


def test_a_missing_field_names_the_entry(tmp_path):
    copy = _copy(MEMORY, tmp_path, lambda text: text.replace('title = "fragmentation"\n', "", 1))
    assert _refusal(copy) == "copy/codes.toml: codes[MEM002]: missing key 'title'"


def test_a_family_field_is_required_where_the_family_has_it(tmp_path):
    copy = _copy(ANALYZE, tmp_path, lambda text: text.replace('severity = "warning"\n', "", 1))
    assert _refusal(copy) == "copy/codes.toml: codes[ANA002]: missing key 'severity'"


def test_a_code_twice_names_both_entries(tmp_path):
    copy = _copy(VERIFY, tmp_path, lambda text: text.replace('code = "VER003"', 'code = "VER001"', 1))
    assert _refusal(copy) == "copy/codes.toml: codes[VER001]: code \"VER001\" again (entries 1 and 3)"


def test_a_code_of_another_family_is_refused(tmp_path):
    copy = _copy(MEMORY, tmp_path, lambda text: text.replace('code = "MEM004"', 'code = "ANA004"', 1))
    assert _refusal(copy) == ("copy/codes.toml: codes[ANA004].code: expected a MEM code (MEM and 3 digits), "
                              "got \"ANA004\"")
    engine = _copy(APPLY, tmp_path / "engine", lambda text: text.replace('code = "NPU002"', 'code = "NPU102"', 1))
    assert "codes[NPU102].code: expected a NPU0 code (NPU0 and 2 digits)" in _refusal(engine)


def test_a_template_without_its_fields_or_a_page_and_a_template_are_refused(tmp_path):
    copy = _copy(ANALYZE, tmp_path, lambda text: text.replace('fields.section = "memory"\n', "", 1))
    assert _refusal(copy) == ("copy/codes.toml: codes[ANA049].fields: template 'tuning' takes example, rules, "
                              "section; given example, rules")
    both = _copy(ANALYZE, tmp_path / "both", lambda text: text.replace(
        'template = "tuning"\nfields.section = "memory"', 'page = "text"\ntemplate = "tuning"\nfields.section = "memory"'))
    assert _refusal(both) == "copy/codes.toml: codes[ANA049]: needs either 'page' or 'template' (with 'fields')"


def test_a_toml_syntax_error_names_file_and_line(tmp_path):
    copy = _copy(VERIFY, tmp_path, lambda text: text.replace('title = "the random seed differs"',
                                                             'title = "the random seed differs', 1))
    message = _refusal(copy)
    assert message.startswith("copy/codes.toml: not valid TOML: ") and "line " in message

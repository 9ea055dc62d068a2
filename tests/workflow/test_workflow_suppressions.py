"""Suppressions like ruff's: `# noqa: CODE` honoured, unknown codes in `# npu-migrate:
ignore[...]` warned (NPU001, like RUF100), `--add-noqa` silences what remains; diagnostics
point at `npu-migrate rules CODE`, which works for every code an installed copy can print;
newer Python syntax than the running interpreter's is migrated."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from npu_migrate.commands.rules import code_page

from workflow_helpers import apply, cli, write

ERROR_LINE = "os.environ['CUDA_VISIBLE_DEVICES'] = '1,0'"  # NPU201, error: ids not ascending


def test_noqa_with_our_code_suppresses_and_a_bare_noqa_does_not(tmp_path, monkeypatch):
    write(tmp_path / "a.py", "import torch\nx = t.cuda()  # noqa: E501, NPU101\ny = t.cuda()  # noqa\n")
    apply("a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    lines = (tmp_path / "a.py").read_text().splitlines()
    assert "x = t.cuda()  # noqa: E501, NPU101" in lines  # our code listed: left alone
    assert "y = t.npu()  # noqa" in lines  # a bare noqa is for other linters


def test_unknown_code_in_a_suppression_is_warned_with_a_suggestion(tmp_path, monkeypatch):
    write(tmp_path / "a.py", f"import os\n{ERROR_LINE}  # npu-migrate: ignore[NPU2O1]\n")
    result = apply("--check", "--output-format", "json", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    found = {d["code"]: d for d in json.loads(result.stdout)["files"][0]["diagnostics"]}
    assert set(found) == {"NPU001", "NPU201"}  # the typo silences nothing, and says so
    assert found["NPU001"]["line"] == 2 and found["NPU001"]["severity"] == "warning"
    assert "`NPU2O1`" in found["NPU001"]["message"] and "did you mean NPU201?" in found["NPU001"]["message"]
    write(tmp_path / "b.py", f"import os\n{ERROR_LINE}  # npu-migrate: ignore[NPU2]\n")  # a prefix
    clean = apply("--check", "--output-format", "json", "b.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert json.loads(clean.stdout)["files"] == []  # a prefix is known: nothing to report


@pytest.mark.parametrize("comment, why", [
    ("# npu-migrate: ignore[NPU201,,", "unclosed"),
    ("# npu-migrate: ignore[NPU201", "unclosed"),
    ("# npu-migrate: ignore[]", "empty"),
    ("# npu-migrate: ignore[ ]", "empty"),
    ("# npu-migrate: ignore[NPU-201]", "not a code"),
    ("# npu-migrate: ignore NPU201", "after `ignore`"),
    ("# npu-migrate: ignore: NPU201", "after `ignore`"),
])
def test_a_malformed_suppression_is_reported_and_never_silences_everything(comment, why, tmp_path, monkeypatch):
    """Issue 29: `ignore[NPU101,,` (unclosed) silenced every code on its line and `ignore[]`
    none, both silently. A malformed comment now silences nothing and says why (NPU002)."""
    write(tmp_path / "a.py", f"import os\n{ERROR_LINE}  {comment}\n")
    result = apply("--check", "--output-format", "json", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    found = {d["code"]: d for d in json.loads(result.stdout)["files"][0]["diagnostics"]}
    assert set(found) == {"NPU002", "NPU201"}, found  # the error is still reported
    assert found["NPU002"]["line"] == 2 and found["NPU002"]["severity"] == "warning"
    assert why in found["NPU002"]["message"]


@pytest.mark.parametrize("comment", ["# npu-migrate: ignore", "# npu-migrate: ignore  # legacy code",
                                     "# npu-migrate: ignore[NPU201]", "# npu-migrate: ignore [NPU201]",
                                     "# npu-migrate: ignore[NPU201,,NPU101]", "# npu-migrate: ignore[NPU2 NPU1]"])
def test_well_formed_suppressions_silence_and_are_not_reported(comment, tmp_path, monkeypatch):
    write(tmp_path / "a.py", f"import os\n{ERROR_LINE}  {comment}\n")
    result = apply("--check", "--output-format", "json", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert json.loads(result.stdout)["files"] == [], comment


def test_add_noqa_silences_what_remains_and_nothing_else_changes(tmp_path, monkeypatch):
    body = (f"import os\nimport torch\n{ERROR_LINE}\nx = torch.ones(2).cuda()\n"
            "y = (1 +\n     2)\n")
    write(tmp_path / "a.py", body)
    before = json.loads(apply("--check", "--output-format", "json", "a.py", cwd=tmp_path,
                              monkeypatch=monkeypatch).stdout)["files"][0]["diagnostics"]
    assert [d["code"] for d in before] == ["NPU201"]
    result = apply("--add-noqa", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code in (0, 1) and "added 1 suppression(s)" in result.stderr, result.stderr
    text = (tmp_path / "a.py").read_text()
    assert text == body.replace(ERROR_LINE, f"{ERROR_LINE}  # npu-migrate: ignore[NPU201]")
    ast.parse(text)
    after = json.loads(apply("--check", "--output-format", "json", "a.py", cwd=tmp_path,
                             monkeypatch=monkeypatch).stdout)["files"][0]
    assert after["diagnostics"] == [] and after["changed"]  # the rewrite itself is still pending


def test_add_noqa_refuses_a_line_ending_in_a_backslash(tmp_path, monkeypatch):
    body = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = \\\n    '1,0'\n"
    write(tmp_path / "a.py", body)
    found = json.loads(apply("--check", "--output-format", "json", "a.py", cwd=tmp_path,
                             monkeypatch=monkeypatch).stdout)["files"][0]["diagnostics"]
    if not any(d["line"] == 2 for d in found):
        pytest.skip("the diagnostic is not reported on the backslash line")
    result = apply("--add-noqa", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "ends with a backslash" in result.stderr
    assert (tmp_path / "a.py").read_text() == body


@pytest.mark.parametrize("code", ["NPU101", "NPU000", "NPU001", "ANA001", "MEM001", "VER001"])
def test_every_linked_code_has_a_page(code, tmp_path):
    result = cli("rules", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"# {code}")


@pytest.mark.parametrize("code", ["NPU101", "NPU000", "NPU001", "MEM001"])
def test_codes_have_a_page_in_an_installed_copy_without_docs(code, tmp_path):
    """The layout a wheel installs (no docs/ folder): `rules CODE` still prints a page."""
    from test_workflow_rules_cmd import installed_copy, run_installed

    site = tmp_path / "site"
    installed_copy(site)
    result = run_installed(site, "-m", "npu_migrate", "rules", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"# {code}")


def test_sarif_help_uri_is_the_page_on_this_machine_or_left_out(tmp_path, monkeypatch):
    """A release tag that does not exist made every `helpUri` dead (issue 29): a checkout points at
    its own page, a wheel (no docs folder) gives none, and the help text names the command that
    prints the page from any installed copy."""
    write(tmp_path / "a.py", f"import os\n{ERROR_LINE}\n")
    sarif = json.loads(apply("--check", "--output-format", "sarif", "a.py", cwd=tmp_path,
                             monkeypatch=monkeypatch).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    page = Path(__file__).parents[2] / "docs" / "rules" / "NPU201.md"
    assert rules["NPU201"]["helpUri"] == page.as_uri() and page.is_file()
    assert "npu-migrate rules NPU201" in rules["NPU201"]["help"]["text"]
    from test_workflow_rules_cmd import installed_copy, run_installed

    site = tmp_path / "site"
    installed_copy(site)
    write(site.parent / "a.py", f"import os\n{ERROR_LINE}\n")
    result = run_installed(site, "-m", "npu_migrate", "apply", "--isolated", "--no-cache", "--check",
                           "--output-format", "sarif", "a.py")
    rules = {r["id"]: r for r in json.loads(result.stdout)["runs"][0]["tool"]["driver"]["rules"]}
    assert "helpUri" not in rules["NPU201"] and "npu-migrate rules NPU201" in rules["NPU201"]["help"]["text"]


def test_apply_codes_have_pages_with_the_required_sections():
    for code in ("NPU000", "NPU001", "NPU002"):
        page = code_page(code)
        assert page is not None and page.startswith(f"# {code} ")
        for section in ("## What it means", "## Why", "## Evidence", "## What to do"):
            assert section in page


APPLY_EXAMPLE = re.compile(r"## Example\n```python\n# (?P<file>\S+)\n(?P<source>.*?)```\n```\n"
                           r"\$ npu-migrate apply (?P<args>[^\n]+)\n(?P<line>[^\n]+)\n```", re.S)


@pytest.mark.parametrize("code", ["NPU000", "NPU001", "NPU002"])
def test_an_apply_code_example_is_what_apply_prints(code, tmp_path, monkeypatch):
    """The page's example file, run through the page's command, prints the page's line."""
    match = APPLY_EXAMPLE.search(code_page(code) or "")
    assert match, f"{code}: no example"
    write(tmp_path / match["file"], match["source"])
    result = apply("--isolated", "--no-cache", *match["args"].split(), cwd=tmp_path, monkeypatch=monkeypatch)
    assert match["line"] in (result.stdout + result.stderr).splitlines(), result.stdout + result.stderr
    assert code in match["line"] or code == "NPU000"  # a failed file is listed by its reason


NEWER_SYNTAX = '''\
import torch


def first[T](items: list[T]) -> T:
    return items[0].cuda()


type Batch = list[torch.Tensor]
label = f"{"dev" + f"{0}"}"


class Box[T]:
    def move(self, x: T) -> T:
        return x.cuda()
'''


def test_python_312_syntax_is_migrated_on_any_interpreter(tmp_path, monkeypatch):
    write(tmp_path / "gen.py", NEWER_SYNTAX)
    result = apply("gen.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "gen.py").read_text()
    assert text.count(".npu()") == 2 and ".cuda()" not in text
    assert "def first[T](items: list[T]) -> T:" in text and 'f"{"dev" + f"{0}"}"' in text
    assert "import torch_npu" in text

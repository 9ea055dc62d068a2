"""`npu-migrate rules` lists every rule with its fix safety and targets; `rules CODE` prints the
page rendered from the installed code (the same text as docs/rules/CODE.md), also from an
installed (non-editable) copy where docs/ is absent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from click.testing import CliRunner
from workflow_helpers import REPO

from codemods.api.registry import all_rules
from npu_migrate.commands.rules import command


def test_listing_has_every_rule_with_default_fix_safety_and_targets():
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["CODE", "NAME", "DEFAULT", "FIX", "TARGETS", "SUMMARY"]
    by_code = {row.split()[0]: row.split() for row in rows}
    rules = all_rules()
    assert set(by_code) == {r.code for r in rules}
    for rule in rules:
        _, name, default, fix, targets, *_ = by_code[rule.code]
        expected = "npu,portable" if "portable" in rule.supported_targets or rule.portable_keeps else "npu"  # codemods/api/targets.py
        assert (name, default, fix, targets) == (rule.name, "on" if rule.default else "off", rule.fix.value, expected)
    assert any(not r.default for r in rules) and "off" in {v[2] for v in by_code.values()}


def test_doc_page_is_the_generated_page():
    rule = next(r for r in all_rules() if r.code == "NPU203")
    result = CliRunner().invoke(command, [rule.name])  # by name as well as by code
    assert result.exit_code == 0
    assert result.stdout == (REPO / "docs" / "rules" / "NPU203.md").read_text(encoding="utf-8")
    assert result.stdout.startswith("# NPU203: hccl-buffsize\n")
    assert "Fix: `safe`. Default: on." in result.stdout and "- **npu**: rewrites" in result.stdout


def test_json_carries_targets_and_the_page():
    described = json.loads(CliRunner().invoke(command, ["NPU205", "--format", "json"]).stdout)
    assert described["fix"] == "none" and described["targets"]["npu"] == "reports (diagnostic only)"
    assert described["targets"]["portable"].startswith("the same report")
    assert described["doc"].startswith("# NPU205: env-var-no-counterpart\n")


def test_a_wing_code_prints_its_page():
    from npu_migrate.core.codes import pages
    from npu_migrate.memory.data_tables import TABLES

    result = CliRunner().invoke(command, ["mem001"])
    assert result.exit_code == 0 and result.stdout == pages(TABLES)["MEM001"]
    assert result.stdout.startswith("# MEM001 possible leak\n\n## What it means\n")


def test_unknown_code_exits_2():
    result = CliRunner().invoke(command, ["NOPE42"])
    assert result.exit_code == 2 and "unknown rule: 'NOPE42'" in result.stderr


def installed_copy(site: Path) -> None:
    """The layout a wheel installs: the two packages, no docs/ folder beside them."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "npu_migrate", site / "npu_migrate", ignore=ignore)
    shutil.copytree(REPO / "codemods", site / "codemods", ignore=ignore)


def run_installed(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """-S: no .pth files, so the editable install's import hook cannot shadow the copy; the
    dependencies come from site-packages put on the path by hand."""
    path = os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])
    return subprocess.run([sys.executable, "-S", *args], cwd=site.parent,
                          env={"PYTHONPATH": path, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          capture_output=True, text=True, timeout=120, check=False)


def test_doc_page_from_an_installed_copy(tmp_path):
    site = tmp_path / "site"
    installed_copy(site)
    probe = run_installed(site, "-c", "import npu_migrate; print(npu_migrate.__file__)")
    assert probe.stdout.startswith(str(site)), probe.stderr  # the copy, not the editable checkout, is imported
    built = run_installed(site, "-m", "npu_migrate", "rules", "NPU101")
    assert built.returncode == 0, built.stderr
    assert built.stdout == (REPO / "docs" / "rules" / "NPU101.md").read_text(encoding="utf-8")
    # the page is the installed code's: a docstring changed in the copy shows, docs/ plays no part
    module = site / "codemods" / "rules" / "npu101_cuda_method.py"
    module.write_text(module.read_text(encoding="utf-8").replace(
        "Safe: same method, same arguments", "Safe (as installed): same method, same arguments"), encoding="utf-8")
    changed = run_installed(site, "-m", "npu_migrate", "rules", "NPU101")
    assert "Safe (as installed): same method" in changed.stdout
    wing = run_installed(site, "-m", "npu_migrate", "rules", "VER001")
    assert wing.returncode == 0 and wing.stdout.startswith("# VER001")


def test_commands_refuse_a_broken_shipped_code_table_with_one_line(tmp_path):
    """In a copy of the packages: the table check, the doc generator and `rules CODE` each print
    the same one line (no traceback) and fail."""
    site = tmp_path / "site"
    installed_copy(site)
    shutil.copytree(REPO / "docs", site / "docs")
    table = site / "npu_migrate" / "memory" / "data" / "codes.toml"
    table.write_text(table.read_text(encoding="utf-8").replace('code = "MEM005"', 'code = "MEM001"', 1),
                     encoding="utf-8")
    line = 'npu_migrate/memory/data/codes.toml: codes[MEM001]: code "MEM001" again (entries 1 and 5)'
    checked = run_installed(site, "-m", "npu_migrate.commands.tables", "--check")
    assert (checked.returncode, checked.stderr) == (1, f"data: {line}\n")
    docs = run_installed(site, "-m", "npu_migrate.commands.docgen", "--check")
    assert (docs.returncode, docs.stderr) == (2, f"data: {line}\n")
    page = run_installed(site, "-m", "npu_migrate", "rules", "MEM002")
    assert (page.returncode, page.stderr) == (2, f"npu-migrate: error: {line}\n")

"""`npu-migrate rules` lists every rule; `rules CODE` prints its doc page from a checkout and
from an installed (non-editable) copy where docs/ is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from click.testing import CliRunner

from npu_migrate.commands.rules import command
from codemods.framework.registry import all_rules

from workflow_helpers import REPO, write


def test_listing_has_every_rule_with_default_and_fix_safety():
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["CODE", "NAME", "DEFAULT", "FIX", "SUMMARY"]
    by_code = {row.split()[0]: row.split() for row in rows}
    rules = all_rules()
    assert set(by_code) == {r.code for r in rules}
    for rule in rules:
        code, name, default, fix, *_ = by_code[rule.code]
        assert (name, default, fix) == (rule.name, "on" if rule.default else "off", rule.fix.value)
    assert any(not r.default for r in rules) and "off" in {v[2] for v in by_code.values()}


def test_doc_page_from_the_checkout():
    documented = [r for r in all_rules() if (REPO / "docs" / "rules" / f"{r.code}.md").is_file()]
    rule = (documented or list(all_rules()))[0]
    result = CliRunner().invoke(command, [rule.name])  # by name as well as by code
    assert result.exit_code == 0
    if documented:
        assert result.stdout == (REPO / "docs" / "rules" / f"{rule.code}.md").read_text(encoding="utf-8")
    assert result.stdout.startswith(f"# {rule.code}: ")


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
    rule = next(r for r in all_rules() if r.code == "NPU101")
    built = run_installed(site, "-m", "npu_migrate", "rules", "NPU101")
    assert built.returncode == 0, built.stderr
    assert built.stdout.startswith("# NPU101: cuda-method\n") and rule.summary in built.stdout
    assert "## Fix safety" in built.stdout and "Default: on." in built.stdout
    # with the docs shipped as package data (`npu_migrate_docs`), that page wins
    write(site / "npu_migrate_docs" / "rules" / "NPU101.md", "# NPU101: cuda-method\n\nshipped page\n")
    shipped = run_installed(site, "-m", "npu_migrate", "rules", "NPU101")
    assert shipped.stdout == "# NPU101: cuda-method\n\nshipped page\n"

"""What a plain `pip install npu-migrate` gives: libcst, click and rich. numpy comes only with
the `memory` extra; without it `memory` says so in one line and everything else works."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from workflow_helpers import CUDA, REPO, write

# run the CLI with numpy made unimportable, as in an environment without the extra
WITHOUT_NUMPY = ("import runpy, sys; sys.modules['numpy'] = None; sys.argv[0] = 'npu-migrate'; "
                 "runpy.run_module('npu_migrate', run_name='__main__')")


def cli_without_numpy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_NUMPY, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_required_dependencies_are_the_ones_the_readme_names():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = sorted(spec.split(">")[0].split("=")[0].split("<")[0].strip()
                   for spec in project["dependencies"])
    # pathspec reads exclude globs as .gitignore does, packaging reads requirement lines (issue 29)
    assert names == ["click", "libcst", "packaging", "pathspec", "rich"]
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "A plain install pulls libcst, click, rich, pathspec and packaging only." in readme
    assert any(spec.startswith("numpy") for spec in project["optional-dependencies"]["memory"])


def test_memory_without_numpy_is_one_line_naming_the_extra(tmp_path):
    snapshot = write(tmp_path / "snap.pickle", "not read: numpy is missing first")
    result = cli_without_numpy("memory", str(snapshot), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "numpy" in lines[0] and "pip install 'npu-migrate[memory]'" in lines[0]


def test_apply_and_rules_do_not_need_numpy(tmp_path):
    source = write(tmp_path / "train.py", CUDA)
    applied = cli_without_numpy("apply", "--no-cache", str(source), cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert ".npu()" in source.read_text()
    listed = cli_without_numpy("rules", cwd=tmp_path)
    assert listed.returncode == 0 and "NPU101" in listed.stdout, listed.stderr

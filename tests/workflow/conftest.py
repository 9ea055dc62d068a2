"""Fixtures for the workflow tests (helpers live in workflow_helpers.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_helpers import PLUGIN_SOURCE


@pytest.fixture(scope="session")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/plugin_example pip-installed (as a user would, entry points included) into a
    private --target folder, to be put on PYTHONPATH of a subprocess."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    # pip builds in the source tree: build from a copy so the repository stays clean
    shutil.copytree(PLUGIN_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = work / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--no-compile", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "npu_migrate_example_plugin").is_dir()
    return target

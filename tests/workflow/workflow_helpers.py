"""Shared helpers for the workflow tests: the CLI run in-process (fast) or as a real
subprocess (where a user's shell, signals, entry points or pre-commit are involved)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

REPO = Path(__file__).resolve().parents[2]
PLUGIN_SOURCE = REPO / "fixtures" / "plugin_example"

CUDA = "import torch\nx = torch.ones(2).cuda()\nprint(x.is_cuda)\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def apply(*args: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    """`npu-migrate apply ARGS` in this process, from `cwd`."""
    from npu_migrate.commands.apply import command

    monkeypatch.chdir(cwd)
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def summary_of(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)["summary"]


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m npu_migrate ARGS` as a real process."""
    full_env = dict(os.environ)
    full_env.pop("NO_COLOR", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                             "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
                            cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout

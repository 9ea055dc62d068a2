"""The README's checkable claims about commands, files and figures, each run for real (issue 29:
"(writes nothing)" for `--dry-run` while a cache folder appeared; "named files are processed
whatever their suffix" while an extension-less bash script was skipped)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_helpers import REPO, apply, git, write

README = (REPO / "README.md").read_text(encoding="utf-8")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_command_1_changes_no_file_and_leaves_only_the_cache_git_ignores(tmp_path):
    """Command 1 as the README writes it, in a fresh copy of the repository's demo project."""
    block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    command = "pip install -e . && npu-migrate apply fixtures/cuda_project --dry-run"
    comment = " ".join(block.split(command)[0].replace("#", " ").split())
    assert "(changes no file; the result cache goes to .npu-migrate-cache/, which git ignores" in comment
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "fixtures" / "cuda_project", clone / "fixtures" / "cuda_project")
    git(clone, "init", "-q")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "clone")
    before = snapshot(clone / "fixtures")
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "fixtures/cuda_project", "--dry-run"],
                            cwd=clone, capture_output=True, text=True, timeout=120, check=False,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 1 and "+++ b/fixtures/cuda_project/" in result.stdout, result.stderr
    assert snapshot(clone / "fixtures") == before
    new = {p.name for p in clone.iterdir()} - {"fixtures", ".git"}
    assert new == {".npu-migrate-cache"}  # what the README says appears
    assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""  # and git never shows it


def test_no_cache_writes_nothing_at_all(tmp_path, monkeypatch):
    write(tmp_path / "a.py", "import torch\nx = torch.ones(2).cuda()\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = apply("--dry-run", "--no-cache", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1 and sorted(p.name for p in tmp_path.iterdir()) == before


LAUNCH = "#!/usr/bin/env bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py\n"


@pytest.mark.parametrize("name, text, expected", [
    ("run_train", LAUNCH, "export ASCEND_RT_VISIBLE_DEVICES=0,1"),  # shell by its #! line
    ("job.slurm", "#!/bin/sh -e\nexport CUDA_VISIBLE_DEVICES=0\n", "export ASCEND_RT_VISIBLE_DEVICES=0"),
    ("train.txt.bak", "import torch\nx = torch.ones(2).cuda()\n", "x = torch.ones(2).npu()"),  # Python
    ("tool", "#!/usr/bin/env -S python3 -u\nimport torch\nx = torch.ones(2).cuda()\n", "x = torch.ones(2).npu()"),
])
def test_named_files_are_processed_whatever_their_suffix(name, text, expected, tmp_path, monkeypatch):
    claim = "Files named on the command line are processed whatever their suffix"
    assert claim in " ".join(README.split())
    write(tmp_path / name, text)
    result = apply("--isolated", "--no-cache", name, cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert expected in (tmp_path / name).read_text()


def test_a_named_script_of_another_language_is_left_out_with_a_note(tmp_path, monkeypatch):
    write(tmp_path / "report", "#!/usr/bin/perl\nprint 'cuda';\n")
    result = apply("--isolated", "--no-cache", "report", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0 and "report" in result.stderr and "perl" in result.stderr
    assert (tmp_path / "report").read_text() == "#!/usr/bin/perl\nprint 'cuda';\n"
    assert "another interpreter" in " ".join(README.split())


def test_folders_yield_python_shell_and_cuda_files_and_not_extensionless_scripts(tmp_path, monkeypatch):
    write(tmp_path / "p" / "a.py", "x = 1\n")
    write(tmp_path / "p" / "b.sh", LAUNCH)
    write(tmp_path / "p" / "c.cu", "__global__ void k() {}\n")
    write(tmp_path / "p" / "run_train", LAUNCH)
    result = apply("--isolated", "--show-files", "p", cwd=tmp_path, monkeypatch=monkeypatch)
    assert sorted(Path(line).name for line in result.stdout.split()) == ["a.py", "b.sh", "c.cu"]
    assert re.search(r"folders yield `\.py`, notebook, shell and CUDA files", " ".join(README.split()))

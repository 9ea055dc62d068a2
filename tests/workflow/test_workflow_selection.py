"""Narrowing a run: `--changed-since REV` in a real git repository and `--shard K/N`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workflow_helpers import CUDA, apply, git, write


def scanned(result) -> list[str]:
    assert result.exit_code in (0, 1), result.output
    payload = json.loads(result.stdout)
    return sorted(Path(f["path"]).as_posix() for f in payload["files"]), payload["summary"]["files_scanned"]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    for name in ("a.py", "sub/b.py", "sub/c.py", "sub/old_name.py", "docs/notes.md"):
        write(root / name, CUDA + f"# {name}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    write(root / "sub" / "b.py", CUDA + "y = 1\n")  # committed change
    git(root, "mv", "sub/old_name.py", "sub/new_name.py")  # rename
    git(root, "commit", "-qam", "second")
    write(root / "sub" / "c.py", CUDA + "z = 2\n")  # unstaged change
    write(root / "new.py", CUDA)  # untracked
    write(root / "ignored" / "x.py", CUDA)
    write(root / ".gitignore", "ignored/\n")
    return root, base


def test_changed_since_takes_committed_unstaged_renamed_and_new_files(repo, monkeypatch):
    root, base = repo
    files, count = scanned(apply("--check", "--format", "json", "--changed-since", base, ".",
                                 cwd=root, monkeypatch=monkeypatch))
    assert files == ["new.py", "sub/b.py", "sub/c.py", "sub/new_name.py"] and count == 4
    files, _ = scanned(apply("--check", "--format", "json", "--changed-since", "HEAD", ".",
                             cwd=root, monkeypatch=monkeypatch))
    assert files == ["new.py", "sub/c.py"]


def test_changed_since_from_a_subfolder_and_through_a_symlink(repo, monkeypatch, tmp_path):
    root, base = repo
    files, _ = scanned(apply("--check", "--format", "json", "--changed-since", base, ".",
                             cwd=root / "sub", monkeypatch=monkeypatch))
    assert files == ["b.py", "c.py", "new_name.py"]
    link = tmp_path / "link"
    os.symlink(root, link)
    files, _ = scanned(apply("--check", "--format", "json", "--changed-since", base, str(link / "sub"),
                             cwd=tmp_path, monkeypatch=monkeypatch))
    assert [Path(f).name for f in files] == ["b.py", "c.py", "new_name.py"]


def test_changed_since_writes_only_changed_files(repo, monkeypatch):
    root, _ = repo
    result = apply("--changed-since", "HEAD", ".", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert ".npu()" in (root / "sub" / "c.py").read_text() and ".npu()" in (root / "new.py").read_text()
    assert ".cuda()" in (root / "a.py").read_text() and ".cuda()" in (root / "sub" / "b.py").read_text()


@pytest.mark.parametrize("revision, message", [("no-such-branch", "not a known git revision"),
                                               ("HEAD~99", "not a known git revision")])
def test_changed_since_bad_revision_exits_2(repo, monkeypatch, revision, message):
    root, _ = repo
    result = apply("--check", "--changed-since", revision, ".", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 2 and f"--changed-since {revision}: {message}" in result.stderr


def test_changed_since_outside_git_exits_2(tmp_path, monkeypatch):
    write(tmp_path / "a.py", CUDA)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    result = apply("--check", "--changed-since", "HEAD", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2 and "not a git repository" in result.stderr.lower()


def many_files(root: Path, count: int = 40) -> None:
    for i in range(count):
        write(root / f"pkg{i % 5}" / f"sub{i % 2}" / f"mod_{i}.py", CUDA + f"N = {i}\n")


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_the_run(tmp_path, monkeypatch, n):
    many_files(tmp_path)
    whole, total = scanned(apply("--check", "--format", "json", ".", cwd=tmp_path, monkeypatch=monkeypatch))
    assert total == 40
    shards = []
    for k in range(1, n + 1):
        files, _ = scanned(apply("--check", "--format", "json", "--shard", f"{k}/{n}", ".",
                                 cwd=tmp_path, monkeypatch=monkeypatch))
        shards.append(files)
    union = [f for s in shards for f in s]
    assert sorted(union) == whole and len(union) == len(set(union))  # no file twice, none lost
    if n > 1:
        assert all(len(s) < 40 for s in shards)
    again, _ = scanned(apply("--check", "--format", "json", "--shard", f"1/{n}", ".",
                             cwd=tmp_path, monkeypatch=monkeypatch))
    assert again == shards[0]  # deterministic


def test_shards_do_not_depend_on_where_the_run_starts(tmp_path, monkeypatch):
    root = tmp_path / "mono"
    write(root / "pyproject.toml", "[tool.npu-migrate]\n")
    many_files(root, 30)
    from_root, _ = scanned(apply("--check", "--format", "json", "--shard", "2/3", ".",
                                 cwd=root, monkeypatch=monkeypatch))
    from_below, _ = scanned(apply("--check", "--format", "json", "--shard", "2/3", "..",
                                  cwd=root / "pkg1", monkeypatch=monkeypatch))
    assert from_root and [os.path.normpath(os.path.join("pkg1", f)) for f in from_below] == from_root


@pytest.mark.parametrize("spec", ["0/3", "4/3", "a/b", "3", "1/0", "-1/2"])
def test_bad_shard_exits_2(tmp_path, monkeypatch, spec):
    write(tmp_path / "a.py", CUDA)
    result = apply("--check", "--shard", spec, ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2 and "--shard takes K/N" in result.stderr


# -- what a new user trips over when narrowing the rules (issue 29) --------------------------------
LINES = "import torch\nx = torch.ones(2).cuda()\ny = torch.ones(2).cuda()  # noqa: NPU101\n"


def diagnostics_of(result) -> list[tuple[str, int]]:
    files = json.loads(result.stdout)["files"]
    return sorted((d["code"], d["line"]) for f in files for d in f["diagnostics"])


@pytest.mark.parametrize("how", [("--ignore", "NPU101"), ("--ignore", "cuda-method"), ("--ignore", "NPU10")])
def test_switching_a_rule_off_does_not_make_the_sweep_warn_in_its_place(how, tmp_path, monkeypatch):
    """`--ignore NPU101` is a decision about `.cuda()`; NPU599 ("no rule handled it") on the same
    lines would overrule it, and so would it on a line that says `# noqa: NPU101`."""
    write(tmp_path / "a.py", LINES)
    result = apply("--isolated", "--no-cache", "--check", "--output-format", "json", *how, "a.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    assert diagnostics_of(result) == []
    assert (tmp_path / "a.py").read_text() == LINES


def test_a_noqa_for_a_rule_is_a_decision_the_sweep_respects(tmp_path, monkeypatch):
    write(tmp_path / "a.py", LINES)
    result = apply("--isolated", "--no-cache", "--check", "--output-format", "json", "a.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    assert diagnostics_of(result) == []
    write(tmp_path / "b.py", "import torch\nx = torch.ones(2).cuda()  # noqa: F401\n")  # another linter's
    other = apply("--isolated", "--no-cache", "--output-format", "json", "b.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert other.exit_code == 0 and "x = torch.ones(2).npu()" in (tmp_path / "b.py").read_text()


def test_per_file_ignores_are_a_decision_the_sweep_respects(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.npu-migrate.per-file-ignores]\n"legacy/*" = ["NPU101"]\n')
    write(tmp_path / "legacy" / "a.py", "import torch\nx = torch.ones(2).cuda()\n")
    result = apply("--no-cache", "--check", "--output-format", "json", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert diagnostics_of(result) == []


def test_the_sweep_still_reports_what_no_rule_handles(tmp_path, monkeypatch):
    write(tmp_path / "a.py", "import torch\nx = torch.ones(2).cuda()\nflag = torch.version.cuda\n")
    result = apply("--isolated", "--no-cache", "--check", "--output-format", "json", "--ignore", "NPU101", "a.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    assert diagnostics_of(result) == [("NPU599", 3)]


@pytest.mark.parametrize("select", ["NPU101", "cuda-method", "NPU120"])
def test_selecting_a_rule_brings_the_import_its_fix_needs(select, tmp_path, monkeypatch):
    """`--select NPU101` rewrote `.cuda()` to `.npu()` without `import torch_npu`, which is
    what makes `.npu()` exist: the selected fix did not run."""
    write(tmp_path / "a.py", "import torch\nx = torch.ones(2).cuda()\ntorch.cuda.synchronize()\n")
    result = apply("--isolated", "--no-cache", "--select", select, "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert "import torch_npu" in (tmp_path / "a.py").read_text()


def test_ignoring_the_import_rule_is_still_honoured(tmp_path, monkeypatch):
    write(tmp_path / "a.py", "import torch\nx = torch.ones(2).cuda()\n")
    result = apply("--isolated", "--no-cache", "--select", "NPU101", "--ignore", "NPU100", "a.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.py").read_text() == "import torch\nx = torch.ones(2).npu()\n"

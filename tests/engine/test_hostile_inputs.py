"""Bad input that must cost one clear line and never a traceback, a hang or a silent wrong result
(issue 29): file names with control characters, code nested deeper than CPython compiles,
malformed notebooks, hostile configuration values, read-only files, symbolic links in an output
folder, look-alikes of the tool's temp files, and a configuration's cache folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main

ROOT = Path(__file__).resolve().parents[2]
CUDA = "import torch\n\n\ndef f(x):\n    return x.cuda()\n"
MIGRATED = "import torch\nimport torch_npu  # noqa: F401\n\n\ndef f(x):\n    return x.npu()\n"


def invoke(*args, cwd=None, monkeypatch=None):
    if cwd is not None:
        monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, ["apply", *map(str, args)], catch_exceptions=False)


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false",
                           "-c", "init.defaultBranch=main", "-c", "core.quotePath=true", *args],
                          cwd=cwd, capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")


# -- control sequences in file names ------------------------------------------------------------
NAMES = ["\x1b[31mred.py", "tab\there.py", "quote\"back\\slash.py", "caf\u00e9.py", "plain name.py"]


def test_diff_headers_quote_file_names_as_git_does(tmp_path, monkeypatch):
    """A name holding an escape sequence must not reach the terminal raw (it could recolour or
    rewrite the screen); git's C-style quoting is what diff readers and `git apply` understand."""
    for name in NAMES:
        (tmp_path / name).write_text(CUDA)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "cuda")
    ours = invoke("--diff", "--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch).stdout
    assert invoke("--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 0
    theirs = git(tmp_path, "diff")
    headers = sorted(line for line in ours.splitlines() if line.startswith(("--- ", "+++ ")))
    assert headers == sorted(line for line in theirs.splitlines() if line.startswith(("--- ", "+++ ")))
    assert "\x1b" not in ours and len(headers) == 2 * len(NAMES)


# -- nesting deeper than CPython compiles ----------------------------------------------------------
def test_a_file_nested_deeper_than_cpython_compiles_fails_alone(tmp_path, monkeypatch):
    """201 brackets deep: LibCST parses it, no CPython version compiles it (its tokenizer stops at
    200), so it is not "newer syntax" to migrate but a file that fails, named with its line."""
    deep = "y = " + "(" * 201 + "1" + ")" * 201 + "\n"
    (tmp_path / "deep.py").write_text(CUDA + deep)
    (tmp_path / "good.py").write_text(CUDA)
    result = invoke("--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert (tmp_path / "deep.py").read_text() == CUDA + deep
    assert (tmp_path / "good.py").read_text() == MIGRATED
    failure = [line for line in result.stderr.splitlines() if line.startswith("deep.py:")]
    assert failure and failure[0].startswith("deep.py:6:") and "nested" in failure[0], result.stderr
    assert "Traceback" not in result.output


# -- notebooks whose cells are not what nbformat says -----------------------------------------------
def notebook(source):
    cell = {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.parametrize("source", [["import torch\n", 5, "x.cuda()\n"], {"x": 1}, 7, None,
                                    ["import torch\n", ["x.cuda()\n"]]])
def test_a_notebook_with_non_string_sources_costs_one_line_and_the_run_goes_on(source, tmp_path, monkeypatch):
    (tmp_path / "a_bad.ipynb").write_text(notebook(source))
    (tmp_path / "b_good.py").write_text(CUDA)
    result = invoke("--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert (tmp_path / "b_good.py").read_text() == MIGRATED
    lines = [line for line in result.stderr.splitlines() if line.startswith("a_bad.ipynb:")]
    assert len(lines) == 1 and "cell 1" in lines[0] and "source" in lines[0], result.stderr
    assert "Traceback" not in result.output
    diff = invoke("--isolated", "--no-cache", "--diff", "a_bad.ipynb", cwd=tmp_path, monkeypatch=monkeypatch)
    assert diff.exit_code == 1 and diff.stdout == ""


# -- hostile configuration values --------------------------------------------------------------------
def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False)


HOSTILE_TABLES = {
    "nested": "select = " + "[" * 5000 + "]" * 5000 + "\n",
    "nested-table": "per-file-ignores = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
    "long-code": 'select = ["NPU' + "1" * 100_000 + '"]\n',
    "long-key": "x" * 100_000 + " = 1\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TABLES))
@pytest.mark.parametrize("command", ["apply", "analyze"])
def test_a_hostile_configuration_is_one_line_and_exit_2(name, command, tmp_path):
    """A RecursionError traceback (deep nesting) and a minute without an answer (a quadratic
    did-you-mean over a 100,000-character code) were what these gave (issue 29)."""
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\n" + HOSTILE_TABLES[name])
    (tmp_path / "a.py").write_text(CUDA)
    result = run_cli(command, ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "pyproject.toml" in lines[0] and len(lines[0]) < 400, result.stderr[-2000:]
    assert (tmp_path / "a.py").read_text() == CUDA


@pytest.mark.parametrize("option", ["--select", "--ignore", "--enable"])
def test_a_hostile_code_on_the_command_line_is_one_line_and_exit_2(option, tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    result = run_cli("apply", "--isolated", option, "NPU" + "1" * 100_000, ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, result.stderr[-2000:]


# -- read-only files ---------------------------------------------------------------------------------
def test_a_read_only_file_is_refused_with_one_line_and_kept_as_it_is(tmp_path, monkeypatch):
    """A file without its owner's write permission (`chmod a-w`) says "do not edit me"; the
    atomic rename would replace it anyway (it needs only the folder's permission). ruff and black
    open the file for writing, which such a file refuses: npu-migrate refuses it too, by its mode
    (the same as root, who could write it)."""
    locked = tmp_path / "locked.py"
    locked.write_text(CUDA)
    locked.chmod(0o444)
    (tmp_path / "open.py").write_text(CUDA)
    result = invoke("--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert locked.read_text() == CUDA and (locked.stat().st_mode & 0o777) == 0o444
    assert (tmp_path / "open.py").read_text() == MIGRATED
    line = next(line for line in result.stderr.splitlines() if line.startswith("locked.py:"))
    assert "read-only" in line and "chmod u+w" in line
    assert invoke("--isolated", "--no-cache", "--check", ".", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 1
    copy = tmp_path.parent / (tmp_path.name + "-out")
    result = invoke("--isolated", "--no-cache", "--output-dir", copy, "locked.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output  # a migrated copy is ours to write
    assert (copy / "locked.py").read_text() == MIGRATED and (copy / "locked.py").stat().st_mode & 0o777 == 0o444


# -- symbolic links already in an output folder ----------------------------------------------------
def test_output_dir_never_writes_through_a_symbolic_link_it_finds_there(tmp_path, monkeypatch):
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "a.py").write_text(CUDA)
    (source / "pkg" / "b.py").write_text(CUDA)
    victim = tmp_path / "victim.py"
    victim.write_text("precious\n")
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.py").symlink_to(victim)
    (out / "pkg").symlink_to(victim_dir, target_is_directory=True)
    result = invoke("--isolated", "--no-cache", "--output-dir", out, source, cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious\n" and list(victim_dir.iterdir()) == []
    assert not (out / "a.py").is_symlink() and (out / "a.py").read_text() == MIGRATED
    assert not (out / "pkg").is_symlink() and (out / "pkg" / "b.py").read_text() == MIGRATED
    assert (source / "a.py").read_text() == CUDA
    again = invoke("--isolated", "--no-cache", "--output-dir", out, source, cwd=tmp_path, monkeypatch=monkeypatch)
    assert again.exit_code == 0, again.output


# -- look-alikes of the tool's temp files ----------------------------------------------------------
def test_the_stale_temp_clean_up_removes_only_what_a_run_made(tmp_path, monkeypatch):
    from npu_migrate.core import sources

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = sources._scratch_dir(str(tmp_path))  # what a run killed mid-write leaves, renamed to a dead pid
    stale_dead = stale.replace(f"-{os.getpid()}-", f"-{dead.pid}-")
    os.rename(stale, stale_dead)
    (Path(stale_dead) / "new").write_text("half a file")
    user_things = {
        ".npu-migrate-tmp-notes/keep.txt": "mine",
        f".npu-migrate-tmp-{dead.pid}-abcdefgh/keep.txt": "mine too",
        ".npu-migrate-backup.tmp": "an old backup",
        ".npu-migrate-tmp-1-xyz.tmp": "a file, not a folder",
    }
    for name, text in user_things.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (0, 0))  # old: older than any run in flight
    fake = tmp_path / f".npu-migrate-tmp-{dead.pid}-ijklmnop"
    fake.mkdir()
    (fake / ".gitignore").write_text("*\n")  # not the marker a run writes
    (tmp_path / "a.py").write_text(CUDA)
    result = invoke("--isolated", "--no-cache", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert not os.path.exists(stale_dead)
    for name, text in user_things.items():
        assert (tmp_path / name).read_text() == text, name
    assert (fake / ".gitignore").read_text() == "*\n"


# -- a configuration's cache folder ----------------------------------------------------------------
@pytest.mark.parametrize("where", ["../elsewhere", "/tmp/npu-migrate-cache-anywhere", "~/.cache/npu", "link/cache"])
def test_a_configured_cache_dir_stays_inside_the_project(where, tmp_path, monkeypatch):
    """A cloned project's pyproject.toml must not make `apply` write outside the project (the
    cache folder is created and filled); `--cache-dir` on the command line may go anywhere."""
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "outside").mkdir()
    (project / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (project / "pyproject.toml").write_text(f'[tool.npu-migrate]\ncache-dir = "{where}"\n')
    (project / "a.py").write_text(CUDA)
    result = invoke(".", cwd=project, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert "cache-dir" in result.stderr and "--cache-dir" in result.stderr and len(result.stderr.splitlines()) == 1
    assert (project / "a.py").read_text() == CUDA
    assert list((tmp_path / "outside").iterdir()) == []
    elsewhere = tmp_path / "cache-given"
    given = invoke("--isolated", "--cache-dir", elsewhere, ".", cwd=project, monkeypatch=monkeypatch)
    assert given.exit_code == 0 and elsewhere.is_dir()


def test_a_configured_cache_dir_inside_the_project_is_used(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\ncache-dir = "build/./cache"\n')
    (tmp_path / "a.py").write_text(CUDA)
    assert invoke(".", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 0
    assert (tmp_path / "build" / "cache").is_dir()

"""Writes never lose a byte (issue 13, defects 2 and 3, and the odd files): compare-and-swap,
cache entries keyed by the bytes actually migrated, per-file write errors, odd files and paths."""

import errno
import json
import os
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner

import npu_migrate.apply.engine as engine_module  # the runner imports it when a file needs it
from npu_migrate.cli import main
from npu_migrate.core import sources
from npu_migrate.core.parallel import worker_count
from npu_migrate.core.sources import TEMP_PREFIX, remove_stale_temps

CUDA = "import torch\n\n\ndef f(x):\n    return x.cuda()\n"
MIGRATED = "import torch\nimport torch_npu  # noqa: F401\n\n\ndef f(x):\n    return x.npu()\n"
EDIT = "# a line an editor added during the run\n"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def invoke(*args, cache=None):
    """`cache`: the cache folder to use; none by default."""
    options = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    return CliRunner().invoke(main, ["apply", *options, "--isolated", "--select", "NPU10", *map(str, args)])


@pytest.fixture
def project(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(CUDA)
    return tmp_path


def during_the_run(monkeypatch, action, name="b.py"):
    """Run `action(path)` right after the engine migrated `name`, before it is written back:
    an editor saving the file, or a file deleted, while the run is busy."""
    real = engine_module.migrate_text

    def migrate_then_act(text, path, ruleset, tree=None):
        outcome = real(text, path, ruleset, tree)
        if os.path.basename(path) == name:
            action(path)
        return outcome

    monkeypatch.setattr(engine_module, "migrate_text", migrate_then_act)


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def append_edit(path):
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(EDIT)


def leftovers(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".npu-migrate"))


def test_an_edit_made_during_the_run_is_kept_and_reported(project, monkeypatch):
    during_the_run(monkeypatch, append_edit)
    result = invoke(project)
    assert result.exit_code == 1
    assert f"{project / 'b.py'}:0:0: changed during the run; left as it is" in result.output
    assert (project / "b.py").read_text() == CUDA + EDIT
    assert (project / "a.py").read_text() == MIGRATED and (project / "c.py").read_text() == MIGRATED
    assert leftovers(project) == []


def test_a_file_deleted_during_the_run_is_not_recreated(project, monkeypatch):
    during_the_run(monkeypatch, os.unlink)
    result = invoke(project)
    assert result.exit_code == 1
    assert "deleted during the run; not re-created" in result.output
    assert not (project / "b.py").exists()
    assert (project / "c.py").read_text() == MIGRATED


def test_the_cache_never_pairs_an_edit_with_a_result_computed_without_it(project, monkeypatch):
    """The cache used to store a result under the bytes read again after the migration: every
    later cached run then deleted the edit again."""
    with monkeypatch.context() as patch:
        during_the_run(patch, append_edit)
        invoke(project, cache=project / ".cache")
    assert invoke(project, cache=project / ".cache").exit_code == 0
    assert (project / "b.py").read_text() == MIGRATED + EDIT


def test_check_agrees_with_diff_after_another_run_wrote_meanwhile(project, monkeypatch):
    """Two runs on one tree: the other run writes the migrated file while this one is busy.
    `--check` must not then say "would change" while `--diff` shows nothing."""
    with monkeypatch.context() as patch:
        during_the_run(patch, lambda path: write_text(path, MIGRATED))
        invoke(project, "--check", cache=project / ".cache")
    check = json.loads(invoke(project, "--check", "--format", "json", cache=project / ".cache").stdout)
    diff = invoke(project, "--diff", cache=project / ".cache")
    changed_in_diff = diff.stdout.count("\n+++ ") + diff.stdout.startswith("+++ ")
    assert check["summary"]["files_changed"] == changed_in_diff == 2


def test_concurrent_runs_then_check_agrees_with_diff(tmp_path):
    for index in range(40):
        (tmp_path / f"m{index}.py").write_text(CUDA + f"N = {index}\n")
    command = [sys.executable, "-m", "npu_migrate", "apply", "--isolated", "--select", "NPU10", "-j", "2", "."]
    env = dict(os.environ, PYTHONPATH=ROOT)
    runs = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(3)]
    for run in runs:
        run.wait(timeout=300)
    check = subprocess.run(command + ["--check"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    diff = subprocess.run(command + ["--diff"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert check.returncode == diff.returncode == 0, (check.stderr, diff.stdout)
    assert diff.stdout == ""
    assert all((tmp_path / f"m{i}.py").read_text() == MIGRATED + f"N = {i}\n" for i in range(40))
    assert leftovers(tmp_path) == [".npu-migrate-cache"]


def test_a_cache_entry_that_does_not_match_its_checksum_is_rebuilt(project):
    assert invoke(project, "--check", cache=project / ".cache").exit_code == 1
    entries = sorted((project / ".cache").glob("*/*.json"))
    for entry in entries:  # still valid JSON, one edit moved to another line
        data = json.loads(entry.read_text())
        data["edits"][0][2] += 7
        entry.write_text(json.dumps(data))
    assert len(entries) == 3
    result = json.loads(invoke(project, "--check", "--format", "json", cache=project / ".cache").stdout)
    assert result["summary"]["files_cached"] == 0
    assert [e["line"] for e in result["files"][0]["edits"]] == [2, 5]


def test_a_full_disk_fails_one_file_and_the_run_goes_on(project, monkeypatch):
    real = sources.write_all

    def full_for_b(handle, data):
        if b"b-marker" in data:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(handle, data)

    (project / "b.py").write_text(CUDA + "# b-marker\n")
    monkeypatch.setattr(sources, "write_all", full_for_b)
    result = invoke(project)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{project / 'b.py'}:0:0: cannot write: No space left on device; left as it is" in result.output
    assert (project / "b.py").read_text() == CUDA + "# b-marker\n"
    assert (project / "a.py").read_text() == MIGRATED and (project / "c.py").read_text() == MIGRATED
    assert leftovers(project) == []


def test_a_read_only_folder_fails_its_files_and_the_run_goes_on(tmp_path, monkeypatch):
    locked, free = tmp_path / "locked", tmp_path / "free"
    locked.mkdir()
    free.mkdir()
    (locked / "a.py").write_text(CUDA)
    (free / "b.py").write_text(CUDA)
    real = sources.tempfile.mkdtemp

    def read_only(prefix=None, dir=None, **kwargs):  # root ignores chmod, so fault-inject
        if os.path.abspath(dir) == str(locked):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(prefix=prefix, dir=dir, **kwargs)

    monkeypatch.setattr(sources.tempfile, "mkdtemp", read_only)
    result = invoke(tmp_path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{locked / 'a.py'}:0:0: cannot write in its folder: Read-only file system" in result.output
    assert (locked / "a.py").read_text() == CUDA
    assert (free / "b.py").read_text() == MIGRATED
    assert "1 failed" in result.output


def test_mode_owner_and_group_are_kept(project):
    path = project / "a.py"
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 4321, 4322)
    before = os.stat(path)
    assert invoke(project).exit_code == 0
    after = os.stat(path)
    assert path.read_text() == MIGRATED
    assert (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid) == (
        0o640, before.st_uid, before.st_gid)


def test_a_symlink_is_never_replaced_by_a_copy(project):
    (project / "link.py").symlink_to("a.py")
    result = invoke(project)
    assert result.exit_code == 0
    assert (project / "link.py").is_symlink() and os.readlink(project / "link.py") == "a.py"
    assert (project / "a.py").read_text() == MIGRATED  # the target, found where it is
    assert f"{project / 'link.py'}: skipped: a symbolic link (to a.py)" in result.output
    assert "1 skipped" in result.output


def test_a_symlink_named_on_the_command_line_is_skipped_with_a_note(project):
    (project / "link.py").symlink_to("a.py")
    result = invoke(project / "link.py")
    assert result.exit_code == 0 and "skipped: a symbolic link" in result.output
    assert (project / "a.py").read_text() == CUDA and (project / "link.py").is_symlink()


@pytest.mark.parametrize("named", [False, True])
def test_a_fifo_is_skipped_and_never_hangs_outside_git(tmp_path, named):
    (tmp_path / "a.py").write_text(CUDA)
    os.mkfifo(tmp_path / "pipe.py")
    target = [str(tmp_path / "pipe.py"), str(tmp_path / "a.py")] if named else [str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "--isolated",
                           "--select", "NPU10", *target], env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "pipe.py: skipped: not a regular file (a FIFO)" in done.stderr
    assert (tmp_path / "a.py").read_text() == MIGRATED
    assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe.py").st_mode)


@pytest.mark.parametrize("inside", [".", "out"])
def test_output_dir_equal_to_or_inside_an_input_is_refused(project, monkeypatch, inside):
    monkeypatch.chdir(project)
    result = invoke(".", "--output-dir", inside)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--output-dir" in result.output and "choose a folder outside it" in result.output
    assert not (project / "out").exists() and (project / "a.py").read_text() == CUDA


def test_output_dir_that_is_an_input_files_own_folder_is_refused(project, monkeypatch):
    # the copy of a.py would be a.py itself (it used to end in a SameFileError traceback)
    monkeypatch.chdir(project)
    result = invoke("a.py", "--output-dir", ".")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "is the folder of the input a.py" in result.output
    assert (project / "a.py").read_text() == CUDA


def test_output_dir_copy_leaves_fifos_out(project, tmp_path_factory):
    os.mkfifo(project / "pipe")
    out = tmp_path_factory.mktemp("out") / "copy"
    assert invoke(project, "--output-dir", out).exit_code == 0
    assert (out / "a.py").read_text() == MIGRATED and not (out / "pipe").exists()


def test_jobs_are_capped_by_cores_and_files():
    cores = len(os.sched_getaffinity(0))
    assert worker_count(64, 1000) == cores
    assert worker_count(64, 1) == 1
    assert worker_count(None, 3) == min(3, cores)
    assert worker_count(1, 1000) == 1


def test_temp_folders_are_ignored_by_git_and_removed_by_the_next_run(project):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    made = sources._scratch_dir(str(project))  # what a run killed mid-write leaves, of a gone process
    dead = project / os.path.basename(made).replace(f"{TEMP_PREFIX}{os.getpid()}-", f"{TEMP_PREFIX}999999999-")
    os.rename(made, dead)
    (dead / "new").write_text("half a file")
    live = sources._scratch_dir(str(project))  # this process's: still in use
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project,
                            capture_output=True, text=True, check=True).stdout
    assert ".npu-migrate" not in status
    users = project / ".npu-migrate-abc123.tmp"  # a name like ours is not enough (issue 29)
    users.write_text("x")
    os.utime(users, (1, 1))
    assert remove_stale_temps([str(project)]) == 1
    assert not dead.exists() and users.exists() and os.path.isdir(live)

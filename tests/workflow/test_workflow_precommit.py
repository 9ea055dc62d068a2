"""The hooks of .pre-commit-hooks.yaml run by a real `pre-commit` in a temporary git repository:
the check hook fails with the diff, the fix hook rewrites, and then the check passes. Only
staged Python and shell files are given to the hooks.

Two ways of pointing pre-commit at this repository:
- `repo:` a git snapshot of this working tree, exactly as users consume the hooks (pre-commit
  pip-installs it into its own virtualenv: needs PyPI, ~30 s; marked `network` and `slow`, so
  the default run leaves it out: `python -m pytest -m "slow or network"` runs it);
- `repo: local` hooks built from the manifest's own entries with `language: system` (seconds),
  after validating the manifest with pre-commit's own loader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pre_commit.clientlib import load_manifest

from workflow_helpers import REPO, git, write

CUDA_TRAIN = "import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\nprint(model.weight.is_cuda)\n"
LAUNCH = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py\n"
NETWORK_TROUBLE = re.compile(r"Could not find a version|No matching distribution|Failed to establish|"
                             r"Temporary failure in name resolution|Network is unreachable|"
                             r"ConnectionError|Max retries exceeded")


def manifest() -> list[dict]:
    return load_manifest(str(REPO / ".pre-commit-hooks.yaml"))


def test_manifest_is_valid_and_declares_both_hooks():
    hooks = {h["id"]: h for h in manifest()}
    assert set(hooks) == {"npu-migrate-check", "npu-migrate"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "shell"]
        assert hook["pass_filenames"] is True and hook["entry"].startswith("npu-migrate apply")
        # one process per commit: npu-migrate spreads the work itself and starts up only once
        assert hook["require_serial"] is True
    assert "--diff" in hooks["npu-migrate-check"]["entry"].split()
    assert not {"--diff", "--check", "--dry-run"} & set(hooks["npu-migrate"]["entry"].split())


def consumer(tmp_path: Path, config: dict) -> Path:
    root = tmp_path / "consumer"
    root.mkdir()
    git(root, "init", "-q")
    write(root / ".pre-commit-config.yaml", yaml.safe_dump(config, sort_keys=False))
    write(root / "train.py", CUDA_TRAIN)
    write(root / "launch.sh", LAUNCH)
    write(root / "notes.txt", "call .cuda() on the model\n")  # not Python: never given to the hooks
    git(root, "add", "-A")
    write(root / "draft.py", CUDA_TRAIN)  # not staged: must stay as it is
    return root


def pre_commit(root: Path, home: Path, *args: str, extra_env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never", NO_COLOR="1")
    env.pop("PYTHONPATH", None)  # only what the test asks for (the example plugin)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def check_fix_check(root: Path, home: Path, install_timeout: float = 120,
                    extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The user's story: the check fails with a readable diff, the fix rewrites, the check passes."""
    check = pre_commit(root, home, "npu-migrate-check", extra_env=extra_env, timeout=install_timeout)
    if check.returncode != 1 or "--- a/train.py" not in check.stdout:
        return check  # let the caller decide (network trouble while installing, or a failure)
    out = check.stdout
    assert "npu-migrate (check)" in out and "Failed" in out
    assert "-model = torch.nn.Linear(4, 2).cuda()" in out and "+model = torch.nn.Linear(4, 2).npu()" in out
    assert "+import torch_npu" in out
    assert "--- a/launch.sh" in out and "+export ASCEND_RT_VISIBLE_DEVICES=0,1" in out
    assert "notes.txt" not in out and "draft.py" not in out
    assert (root / "train.py").read_text() == CUDA_TRAIN  # the check writes nothing

    fix = pre_commit(root, home, "npu-migrate", extra_env=extra_env)
    assert fix.returncode == 1 and "files were modified by this hook" in fix.stdout, fix.stdout
    migrated = (root / "train.py").read_text()
    assert ".npu()" in migrated and "import torch_npu" in migrated and ".cuda()" not in migrated
    assert "ASCEND_RT_VISIBLE_DEVICES" in (root / "launch.sh").read_text()
    assert (root / "draft.py").read_text() == CUDA_TRAIN and "cuda" in (root / "notes.txt").read_text()

    git(root, "add", "-u")
    second = pre_commit(root, home, "npu-migrate-check", extra_env=extra_env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert re.search(r"npu-migrate \(check\)\.+Passed", second.stdout)
    assert pre_commit(root, home, "npu-migrate", extra_env=extra_env).returncode == 0
    status = git(root, "status", "--porcelain", "--untracked-files=all")
    assert ".npu-migrate-cache" not in status  # the hooks' cache keeps out of the user's git
    return second


def local_hooks(extra_args: list[str] | None = None) -> dict:
    """`repo: local` hooks mirroring the manifest: same ids, arguments and file types; the
    entry runs this interpreter's npu_migrate instead of a pre-commit-built virtualenv."""
    hooks = []
    for hook in manifest():
        entry = hook["entry"].replace("npu-migrate", f"{sys.executable} -m npu_migrate", 1)
        hooks.append({"id": hook["id"], "name": hook["name"], "entry": entry, "language": "system",
                      "types_or": hook["types_or"], "require_serial": hook["require_serial"],
                      "args": extra_args or []})
    return {"repos": [{"repo": "local", "hooks": hooks}]}


def test_local_hooks_check_fix_and_pass(tmp_path):
    root = consumer(tmp_path, local_hooks())
    write(root / "scripts" / "launch", LAUNCH)  # a shell file without suffix: pre-commit passes it
    git(root, "add", "scripts/launch")
    result = check_fix_check(root, tmp_path / "home", extra_env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0


def test_local_check_hook_fails_on_error_level_diagnostics(tmp_path, plugin_path):
    root = consumer(tmp_path, local_hooks())
    for name in ("train.py", "launch.sh"):
        (root / name).unlink()
    write(root / "opt.py", "from acme.kernels import fused_adam_cuda\nfused_adam_cuda([])\n")
    git(root, "add", "-A", ".")
    git(root, "rm", "-q", "--cached", "draft.py")
    env = {"PYTHONPATH": f"{plugin_path}:{REPO}"}  # the plugin, and this checkout's npu-migrate
    failing = pre_commit(root, tmp_path / "home", "npu-migrate-check", extra_env=env)
    assert failing.returncode == 1
    assert "opt.py:2:1: EXA102 [error] `fused_adam_cuda` is CUDA-only" in failing.stdout
    write(root / "opt.py", "from acme.kernels import fused_adam_cuda\n"
                           "fused_adam_cuda([])  # npu-migrate: ignore[EXA102]\n")
    git(root, "add", "opt.py")
    assert pre_commit(root, tmp_path / "home", "npu-migrate-check", extra_env=env).returncode == 0


def snapshot_of_this_tree(tmp_path: Path) -> tuple[Path, str]:
    """A git commit of the working tree as it is now (pre-commit clones a repo at a rev)."""
    source = tmp_path / "hook-source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", ".npu-migrate-cache", "build", "dist", ".venv",
        ".hypothesis", ".pytest_cache", ".whl"))
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-qm", "snapshot")
    return source, git(source, "rev-parse", "HEAD").strip()


@pytest.mark.slow
@pytest.mark.network
def test_repository_hooks_installed_by_pre_commit(tmp_path):
    source, rev = snapshot_of_this_tree(tmp_path)
    config = {"repos": [{"repo": str(source), "rev": rev,
                         "hooks": [{"id": "npu-migrate-check"}, {"id": "npu-migrate"}]}]}
    root = consumer(tmp_path, config)
    result = check_fix_check(root, tmp_path / "home", install_timeout=600)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        log = tmp_path / "home" / "pre-commit.log"
        output += log.read_text() if log.exists() else ""
        if NETWORK_TROUBLE.search(output):
            pytest.skip("pre-commit could not install the hook environment: PyPI is unreachable")
        pytest.fail(output)


def documented_blocks() -> list[str]:
    page = (REPO / "docs" / "pre-commit.md").read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)


def test_the_documented_local_hook_works_as_copied(tmp_path):
    """The set-up docs/pre-commit.md gives for an installed npu-migrate, copied as it is (the
    made-up `rev` it showed before failed when copied: issue 29)."""
    config = yaml.safe_load(documented_blocks()[0])
    assert config["repos"][0]["repo"] == "local"
    root = consumer(tmp_path, config)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    assert shutil.which("npu-migrate", path=path), "npu-migrate is not installed beside this interpreter"
    check = pre_commit(root, tmp_path / "home", "npu-migrate-check", extra_env={"PATH": path})
    assert check.returncode == 1, check.stdout + check.stderr
    assert "--- a/train.py" in check.stdout and "+model = torch.nn.Linear(4, 2).npu()" in check.stdout
    assert (root / "train.py").read_text() == CUDA_TRAIN


def test_the_documented_remote_hook_names_no_made_up_revision():
    """No tag exists, so the remote form gives instructions in place of a value that looks real."""
    remote = yaml.safe_load(documented_blocks()[1])["repos"][0]
    assert remote["repo"].startswith("<") and remote["rev"].startswith("<full SHA printed by git rev-parse")
    assert {hook["id"] for hook in remote["hooks"]} <= {hook["id"] for hook in manifest()}
    for text in (REPO / ".pre-commit-hooks.yaml").read_text(), (REPO / "README.md").read_text():
        assert not re.search(r"rev: *[0-9a-f]{7,40}\b", text)

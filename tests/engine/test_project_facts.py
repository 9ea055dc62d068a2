"""Project facts (issue 24): declared by rules, summarized per file, merged per package root, so
that neighbouring projects never change each other's result, a shard builds only its own roots'
facts, and a run served from its cache imports neither LibCST nor a rule."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import codemods.api.facts as facts_api
from codemods.analyses.cudaonly import CUDA_ONLY_MODULES
from codemods.analyses.deepspeedrefs import DEEPSPEED_REFERENCES
from codemods.analyses.devicevalues import DEVICE_CONSTANTS, DEVICE_PARAMETERS
from codemods.analyses.loadervalues import PINNED_LOADER_HELPERS
from codemods.api.registry import all_rules
from npu_migrate.apply.facts import PackageRoots
from npu_migrate.apply.session import ApplyRequest, prepare
from npu_migrate.commands.apply import command
from npu_migrate.core.config import Settings, SettingsFinder

REPO = Path(__file__).resolve().parents[2]

# two projects side by side, each with a `data.py` and a `settings.py` of its own: alpha's loader
# helper pins memory and its device constant is used as a device; beta's are not
ALPHA = {
    "pyproject.toml": '[project]\nname = "alpha"\n',
    "data.py": "from torch.utils.data import DataLoader\n\n\ndef build_loader(dataset):\n"
               "    return DataLoader(dataset, batch_size=8, pin_memory=True)\n",
    "train.py": "import torch\nfrom data import build_loader\n\n\ndef train(model, dataset):\n"
                "    for x, y in build_loader(dataset):\n        x = x.to(\"cuda\")\n        model(x)\n",
    "settings.py": 'ACCEL = "cuda"\n',
    "run.py": "import torch\nfrom settings import ACCEL\n\n\ndef place(x):\n    return x.to(ACCEL)\n",
}
BETA = {
    "setup.py": "from setuptools import setup\nsetup(name='beta')\n",
    "data.py": "def build_loader(dataset):\n    return iter(dataset)\n",
    "train.py": ALPHA["train.py"],
    "settings.py": 'ACCEL = "cuda"\n',
    "log.py": "from settings import ACCEL\n\n\ndef log_name():\n    return ACCEL + \".log\"\n",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_apply(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "--enable", "pin-memory", *args, "."],
                                catch_exceptions=False)
    return result.output


def contents(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_projects_side_by_side_give_what_each_gives_alone(tmp_path, monkeypatch):
    """A same-named helper (`data.build_loader`) and constant (`settings.ACCEL`) in two projects:
    each project's files resolve within their own package root. Migrated together, the two used
    to contaminate each other (beta's loop got alpha's `non_blocking=True`; alpha's constant was
    left as `"cuda"`, its module name taken for ambiguous)."""
    together, alone = tmp_path / "together", tmp_path / "alone"
    for base in (together, alone):
        write_tree(base / "alpha", ALPHA)
        write_tree(base / "beta", BETA)
    run_apply(together, monkeypatch)
    run_apply(alone / "alpha", monkeypatch)
    run_apply(alone / "beta", monkeypatch)
    assert contents(together) == contents(alone)
    migrated = contents(together)
    assert migrated["alpha/settings.py"] == 'ACCEL = "npu"\n'
    assert 'x.to("npu", non_blocking=True)' in migrated["alpha/train.py"]
    assert 'x.to("npu")\n' in migrated["beta/train.py"] and "non_blocking" not in migrated["beta/train.py"]
    assert migrated["beta/settings.py"] == 'ACCEL = "cuda"\n'


# a third project: alpha's loader helper under beta's names, and a device constant of its own
GAMMA = {
    "data.py": ALPHA["data.py"],
    "train.py": ALPHA["train.py"],
    "settings.py": 'ACCEL = "cpu"\n',
    "run.py": ALPHA["run.py"],
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false",
                           "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def git_project(root: Path, files: dict[str, str]) -> None:
    """A real repository: its files committed, its `.git` the package root's only marker."""
    write_tree(root, files)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")


def source_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}


@pytest.mark.parametrize("parent_is_git", [False, True], ids=["folder", "git-work-tree"])
def test_git_repositories_side_by_side_give_what_each_gives_alone(tmp_path, monkeypatch, parent_is_git):
    """Three repositories cloned side by side (in a plain folder, or inside a work tree of their
    own that lists them as untracked nested repositories), migrated in one run and each from
    inside its own repository: file for file the same, and each resolved within its own root."""
    projects = {"alpha": ALPHA, "beta": BETA, "gamma": GAMMA}
    together, alone = tmp_path / "together", tmp_path / "alone"
    for base in (together, alone):
        for name, files in projects.items():
            git_project(base / name, files)
    if parent_is_git:
        git(together, "init", "-q")
    run_apply(together, monkeypatch)
    for name in projects:
        run_apply(alone / name, monkeypatch)
    migrated = source_files(together)
    assert migrated == source_files(alone)
    assert 'x.to("npu", non_blocking=True)' in migrated["alpha/train.py"]
    assert 'x.to("npu", non_blocking=True)' in migrated["gamma/train.py"]
    assert "non_blocking" not in migrated["beta/train.py"]
    assert migrated["alpha/settings.py"] == 'ACCEL = "npu"\n' and migrated["gamma/settings.py"] == 'ACCEL = "cpu"\n'
    for name in projects:  # nothing but the migration changed the repositories
        changed = set(git(together / name, "diff", "--name-only").split())
        assert changed == {f for f in projects[name] if migrated.get(f"{name}/{f}", projects[name][f]) != projects[name][f]}


def test_the_package_root_is_the_nearest_marker_within_the_bound(tmp_path):
    write_tree(tmp_path, {"mono/a/pyproject.toml": "", "mono/a/pkg/m.py": "", "mono/b/setup.cfg": "",
                          "mono/b/src/b/m.py": "", "mono/loose/m.py": "", "mono/c/.git/HEAD": "",
                          "mono/c/x/m.py": "", "outside/pyproject.toml": "", "outside/m.py": "",
                          "mono/a/pkg/sub/__init__.py": "", "mono/a/pkg/sub/setup.py": "", "mono/a/pkg/sub/m.py": ""})
    mono = tmp_path / "mono"
    roots = PackageRoots(str(mono))
    plain = Settings()
    assert roots.of(str(mono / "a/pkg/m.py"), plain) == str(mono / "a")
    assert roots.of(str(mono / "b/src/b/m.py"), plain) == str(mono / "b")
    assert roots.of(str(mono / "c/x/m.py"), plain) == str(mono / "c")
    assert roots.of(str(mono / "loose/m.py"), plain) == str(mono)  # no marker below the bound
    # a `setup.py` module of a package (Lightning's `trainer/setup.py`) makes no root
    assert roots.of(str(mono / "a/pkg/sub/m.py"), plain) == str(mono / "a")
    # a file outside the bound is a project of the bound (its module names then are none)
    assert roots.of(str(tmp_path / "outside/m.py"), plain) == str(mono)
    # under a configuration the bound is its folder, whatever the run's
    configured = Settings(source=str(mono / "a" / "pyproject.toml"), root=str(mono / "a"))
    assert roots.of(str(mono / "a/pkg/m.py"), configured) == str(mono / "a")


def test_rules_declare_their_facts_and_a_run_builds_only_the_selected_ones(tmp_path, monkeypatch):
    by_code = {rule.code: rule for rule in all_rules()}
    assert by_code["NPU500"].project_facts == (DEVICE_CONSTANTS, DEVICE_PARAMETERS)
    assert by_code["NPU511"].project_facts == by_code["NPU311"].project_facts == (CUDA_ONLY_MODULES,)
    assert by_code["NPU410"].project_facts == (PINNED_LOADER_HELPERS,)
    assert by_code["NPU540"].project_facts == (DEEPSPEED_REFERENCES,)
    write_tree(tmp_path / "alpha", ALPHA)
    monkeypatch.chdir(tmp_path)
    finder = SettingsFinder(isolated=True)
    none = prepare(ApplyRequest(["."], "check", select=["NPU101"], no_cache=True), finder)
    assert none.facts is None
    device = prepare(ApplyRequest(["."], "check", select=["NPU500"], no_cache=True), finder)
    assert device.facts is not None
    said = {key for summaries in device.facts.summaries.values() for key in summaries}
    assert said == {DEVICE_CONSTANTS.key}  # only the settings module defines a device constant


def test_no_rule_code_chooses_work_in_the_apply_wing_or_the_commands():
    """The engine and the commands name no rule to decide what to do: rules declare their facts.
    The only codes they spell are those they report themselves (a failed file, an unknown code in
    a suppression, the `import torch_npu` the engine adds), never in a comparison. Prose (doc
    strings, the pages of those codes: text of several lines) is not code."""
    own = {"NPU000", "NPU001", "NPU002", "NPU100"}
    found: dict[str, list[str]] = {}
    compared = []
    for folder in ("npu_migrate/apply", "npu_migrate/commands"):
        for path in sorted((REPO / folder).glob("*.py")):
            tree = ast.parse(path.read_text())
            docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                          and node.body and isinstance(node.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                        and "\n" not in node.value:
                    for code in re.findall(r"\bNPU\d{3}\b", node.value):
                        found.setdefault(code, []).append(f"{path.name}:{node.lineno}")
                if isinstance(node, ast.Compare):
                    compared += [f"{path.name}:{node.lineno}" for part in ast.walk(node)
                                 if isinstance(part, ast.Constant) and isinstance(part.value, str)
                                 and re.search(r"\bNPU\d{3}\b", part.value)]
    assert set(found) <= own, {code: where for code, where in found.items() if code not in own}
    assert compared == []


def test_a_shard_keeps_package_roots_together_and_gives_the_whole_runs_results(tmp_path, monkeypatch):
    for name in ("p1", "p2", "p3", "p4"):
        write_tree(tmp_path / "whole" / name, ALPHA if name in ("p1", "p3") else BETA)
    shutil.copytree(tmp_path / "whole", tmp_path / "sharded")
    run_apply(tmp_path / "whole", monkeypatch)
    finder = SettingsFinder(isolated=True)
    monkeypatch.chdir(tmp_path / "sharded")
    shards = [prepare(ApplyRequest(["."], "check", shard=f"{k}/2", no_cache=True), finder).files for k in (1, 2)]
    projects = [{f.split(os.sep)[0] for f, _ in files} for files in shards]
    assert projects[0] and projects[1] and not projects[0] & projects[1]  # each project in one shard
    for k in (1, 2):
        run_apply(tmp_path / "sharded", monkeypatch, "--shard", f"{k}/2")
    assert contents(tmp_path / "sharded") == contents(tmp_path / "whole")


def test_summaries_are_reused_from_a_shared_cache_folder(tmp_path, monkeypatch):
    """A later shard (or run) with the same cache folder parses no file for the facts again: a
    root whose files are unchanged takes its index from the store; a root with an edited file
    summarizes that file only (the others' summaries are stored) and merges again."""
    for name in ("p1", "p2"):
        write_tree(tmp_path / name, ALPHA)
    parsed = []
    real = facts_api.parse_or_none

    def counting(data):
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(facts_api, "parse_or_none", counting)
    monkeypatch.chdir(tmp_path)
    finder = SettingsFinder(isolated=True)
    cache = str(tmp_path / "shared-cache")
    request = ApplyRequest(["."], "check", enable=["pin-memory"], cache_dir=cache, jobs=1)
    cold = prepare(request, finder)
    assert parsed and cold.facts is not None
    parsed.clear()
    warm = prepare(request, finder)
    assert parsed == []
    indexes = [run.planner(settings).facts for run in (cold, warm) for _, settings in run.files[:1]]
    assert indexes[0] == indexes[1] and len(indexes[0]) == 2  # both roots have a loader helper
    assert warm.facts is not None and not any(warm.facts.summaries.values())  # nothing summarized again
    edited_data = (ALPHA["data.py"] + "\n\ndef other():\n    return None\n").encode()
    (tmp_path / "p1" / "data.py").write_bytes(edited_data)
    edited = prepare(request, finder)
    assert parsed and set(parsed) == {edited_data}  # its summary and the merge's second look
    assert edited.planner(edited.files[0][1]).facts == indexes[0]


def test_a_cached_recheck_imports_neither_libcst_nor_a_rule(tmp_path):
    """Nor does it start a worker (multiprocessing stays unimported)."""
    write_tree(tmp_path / "alpha", ALPHA)
    write_tree(tmp_path / "beta", BETA)
    probe = ("import sys\nfrom npu_migrate.cli import main\n"
             "try:\n    main(['apply', '--check', '--enable', 'pin-memory', '.'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libcst', 'multiprocessing') "
             "or m.startswith('codemods.rules')), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120, check=False) for _ in range(2)]
    cold, warm = (r.stderr.strip().splitlines()[-1] for r in runs)
    assert "libcst" in cold and "codemods.rules.npu101_cuda_method" in cold  # it did import them cold
    assert warm == "[]", warm
    assert runs[0].stdout == runs[1].stdout and "would change" in runs[1].stderr


# -- the run's one reader: FIFOs, links to devices, files over the size limit (issue 29) ---------

CUDA = "import torch\nx = torch.ones(2).cuda()\n"


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--isolated", "--no-cache", *args],
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_py_never_blocks_the_run(tmp_path):
    """In a folder (walked: outside git) and named on the command line; the project facts read
    every file of the package root, through the same non-blocking reader as the migration."""
    (tmp_path / "good.py").write_text(CUDA)
    (tmp_path / "loader.py").write_text("from torch.utils.data import DataLoader\n")  # a facts reader's gate
    os.mkfifo(tmp_path / "x.py")
    for args in (["."], ["x.py", "good.py"]):
        result = cli(tmp_path, "--check", *args)
        assert result.returncode == 1, result.stderr  # good.py would change; the FIFO changes nothing
        assert [line for line in result.stderr.splitlines() if "x.py" in line] == [
            "x.py: skipped: not a regular file (a FIFO)"]
    assert cli(tmp_path, ".").returncode == 0 and ".npu()" in (tmp_path / "good.py").read_text()


def test_a_link_to_dev_zero_is_skipped_unread(tmp_path):
    (tmp_path / "good.py").write_text(CUDA)
    os.symlink("/dev/zero", tmp_path / "zero.py")
    result = cli(tmp_path, ".")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "zero.py" in line] == [
        "zero.py: skipped: a symbolic link (to /dev/zero); links are never replaced: migrate the file it points to"]
    assert ".npu()" in (tmp_path / "good.py").read_text()


def test_a_file_over_the_size_limit_is_read_by_nothing(tmp_path):
    """The facts used to read and parse a file of any size in the parent (12.9 MB drove it to
    3.2 GB). Here a 4 MB file that every fact's byte test would let through: one error line,
    exit 1, the other files migrated, and the run's memory stays far below what parsing it takes."""
    (tmp_path / "good.py").write_text(CUDA)
    body = "".join(f"loader{i} = DataLoader(ds, pin_memory=True)  # cuda deepspeed x.json\n" for i in range(60_000))
    (tmp_path / "huge.py").write_text("import torch\nfrom torch.utils.data import DataLoader\n" + body)
    size = (tmp_path / "huge.py").stat().st_size
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run([sys.executable, '-m', 'npu_migrate', 'apply', '--isolated', '--no-cache', "
             "'--enable', 'pin-memory', '--jobs', '1', '.'], capture_output=True, text=True)\n"
             "sys.stderr.write(r.stderr)\n"
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(REPO),
                                                           "NPU_MIGRATE_MAX_FILE_BYTES": str(2 * 1024 * 1024)})
    code, peak_kib = map(int, result.stdout.split())
    assert code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("huge.py")]
    assert errors == [f"huge.py:0:0: {size / 2**20:.1f} MiB is over the per-file limit of 2.0 MiB; left untouched "
                      "(raise it with NPU_MIGRATE_MAX_FILE_BYTES=<bytes>)"]
    assert ".npu()" in (tmp_path / "good.py").read_text()
    assert peak_kib < 600 * 1024, f"peak {peak_kib} KiB: the file was read and parsed"


def test_the_facts_summaries_of_a_run_are_json(tmp_path, monkeypatch):
    """Summaries travel between processes and into the cache as JSON: what a worker says is
    what a later run reads back."""
    write_tree(tmp_path / "alpha", ALPHA)
    monkeypatch.chdir(tmp_path)
    run = prepare(ApplyRequest(["."], "check", enable=["pin-memory"], no_cache=True), SettingsFinder(isolated=True))
    assert run.facts is not None
    assert json.loads(json.dumps(run.facts.summaries)) == run.facts.summaries

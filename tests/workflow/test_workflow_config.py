"""`[tool.npu-migrate]` in pyproject.toml: found by walking up, every key has its effect, the
command line overrides it, and bad keys or values are errors naming the key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workflow_helpers import CUDA, apply, git, summary_of, write

from codemods.api.registry import all_rules
from npu_migrate.core.config import load_settings


def project(tmp_path: Path, table: str) -> Path:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", f"[project]\nname = 'demo'\n\n[tool.npu-migrate]\n{table}\n")
    return root


def test_found_by_walking_up_from_the_paths(tmp_path, monkeypatch):
    root = project(tmp_path, 'ignore = ["NPU102"]')
    target = write(root / "pkg" / "deep" / "a.py", CUDA)
    # run from outside the project: the config is found from the path, not from the cwd
    result = apply("--diff", str(target), cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert "+x = torch.ones(2).npu()" in result.stdout
    assert "is_npu" not in result.stdout  # NPU102 ignored by the config
    isolated = apply("--diff", "--isolated", str(target), cwd=tmp_path, monkeypatch=monkeypatch)
    assert "+print(x.is_npu)" in isolated.stdout


def test_nearest_config_wins_and_tables_without_our_section_are_skipped(tmp_path, monkeypatch):
    outer = project(tmp_path, 'ignore = ["NPU101"]')
    inner = outer / "sub"
    write(inner / "pyproject.toml", "[project]\nname = 'no-npu-migrate-table'\n")
    target = write(inner / "a.py", CUDA)
    result = apply("--diff", str(target), cwd=tmp_path, monkeypatch=monkeypatch)
    assert ".npu()" not in result.stdout and "+print(x.is_npu)" in result.stdout
    write(inner / "pyproject.toml", '[tool.npu-migrate]\nignore = ["NPU102"]\n')
    result = apply("--diff", str(target), cwd=tmp_path, monkeypatch=monkeypatch)
    assert "+x = torch.ones(2).npu()" in result.stdout and "is_npu" not in result.stdout


def test_explicit_config_file(tmp_path, monkeypatch):
    config = write(tmp_path / "elsewhere" / "pyproject.toml", '[tool.npu-migrate]\nselect = ["NPU102"]\n')
    target = write(tmp_path / "a.py", CUDA)
    result = apply("--diff", "--config", str(config), str(target), cwd=tmp_path, monkeypatch=monkeypatch)
    assert "+print(x.is_npu)" in result.stdout and ".npu()" not in result.stdout


def test_command_line_select_overrides_config_select(tmp_path, monkeypatch):
    root = project(tmp_path, 'select = ["NPU102"]')
    write(root / "a.py", CUDA)
    from_config = apply("--diff", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert "+print(x.is_npu)" in from_config.stdout and ".npu()" not in from_config.stdout
    overridden = apply("--diff", "--select", "NPU101", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert "+x = torch.ones(2).npu()" in overridden.stdout and "is_npu" not in overridden.stdout
    ignored = apply("--diff", "--select", "NPU101,NPU102", "--ignore", "cuda-method", "a.py",
                    cwd=root, monkeypatch=monkeypatch)
    assert "+print(x.is_npu)" in ignored.stdout and ".npu()" not in ignored.stdout


def test_enable_adds_an_opt_in_rule(tmp_path):
    from npu_migrate.commands.apply import _plan

    opt_in = [r for r in all_rules() if not r.default]
    assert opt_in, "the built-in rules include opt-in ones (insertions)"
    rule = opt_in[0]
    root = project(tmp_path, f'enable = ["{rule.name}"]')
    settings = load_settings([str(root)])
    assert rule.code in _plan(settings, (), (), ()).codes
    assert rule.code not in _plan(load_settings([str(root)], isolated=True), (), (), ()).codes
    # --ignore on the command line removes what the config enabled
    assert rule.code not in _plan(settings, (), (rule.code,), ()).codes


def test_exclude_from_config_and_command_line(tmp_path, monkeypatch):
    root = project(tmp_path, 'exclude = ["legacy", "./pkg/generated"]')
    for name in ("pkg/a.py", "pkg/legacy/b.py", "pkg/generated/c.py", "pkg/other/d.py"):
        write(root / name, CUDA)
    result = apply("--check", "--format", "json", ".", cwd=root, monkeypatch=monkeypatch)
    paths = sorted(Path(f["path"]).as_posix() for f in __import__("json").loads(result.stdout)["files"])
    assert paths == ["pkg/a.py", "pkg/other/d.py"]
    # a root-relative glob also holds when the run starts below the root
    below = apply("--check", "--format", "json", ".", cwd=root / "pkg", monkeypatch=monkeypatch)
    assert summary_of(below)["files_scanned"] == 2
    more = apply("--check", "--format", "json", "--exclude", "other", ".", cwd=root, monkeypatch=monkeypatch)
    assert summary_of(more)["files_scanned"] == 1
    # an explicitly named file is still excluded (pre-commit passes files one by one)
    named = apply("--check", "--format", "json", "pkg/legacy/b.py", cwd=root, monkeypatch=monkeypatch)
    assert summary_of(named)["files_scanned"] == 0


@pytest.mark.parametrize("codes", ['["NPU101"]', '["cuda-method"]', '["ALL"]'])
def test_per_file_ignores(tmp_path, monkeypatch, codes):
    root = project(tmp_path, f'[tool.npu-migrate.per-file-ignores]\n"tests/*" = {codes}')
    write(root / "tests" / "t.py", CUDA)
    write(root / "src" / "s.py", CUDA)
    result = apply(".", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert ".npu()" in (root / "src" / "s.py").read_text()
    test_text = (root / "tests" / "t.py").read_text()
    assert ".cuda()" in test_text
    # NPU102 still applies to tests/ unless everything is ignored there
    assert ("is_npu" in test_text) == (codes != '["ALL"]')


@pytest.mark.parametrize("key, value", [
    ("amp-dtype", '"float16"'), ("target-version", '"2.6.0"'), ("ignore", '["NPU102"]'),
    ("per-file-ignores", '{"x/*" = ["NPU101"]}')])
def test_settings_that_change_results_change_the_cache_key(tmp_path, monkeypatch, key, value):
    root = project(tmp_path, "")
    write(root / "a.py", CUDA)
    first = apply("--check", "--format", "json", "a.py", cwd=root, monkeypatch=monkeypatch)
    again = apply("--check", "--format", "json", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert summary_of(first)["files_cached"] == 0 and summary_of(again)["files_cached"] == 1
    write(root / "pyproject.toml", f"[tool.npu-migrate]\n{key} = {value}\n")
    changed = apply("--check", "--format", "json", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert summary_of(changed)["files_cached"] == 0


def test_amp_dtype_and_target_version_reach_the_rules(tmp_path):
    root = project(tmp_path, 'amp-dtype = "fp16"\ntarget = "portable"\ntarget-version = "2.6.0rc1"')
    options = load_settings([str(root)]).rule_options()
    assert options == {"amp_dtype": "float16", "target": "portable", "target_version": "2.6.0rc1",
                       "snapshot_env": None, "snapshot_max_entries": None}


def test_jobs_from_config_and_command_line(tmp_path, monkeypatch):
    import npu_migrate.apply.session as session_module  # the run's pipeline calls the runner

    seen = []
    real_run = session_module.run

    def spy(files, plan, jobs=None, cache=None):
        seen.append(jobs)
        return real_run(files, plan, jobs, cache)

    monkeypatch.setattr(session_module, "run", spy)
    root = project(tmp_path, "jobs = 3")
    write(root / "a.py", CUDA)
    apply("--check", "a.py", cwd=root, monkeypatch=monkeypatch)
    apply("--check", "--jobs", "1", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert seen == [3, 1]


def test_cache_dir_is_relative_to_the_config_and_overridable(tmp_path, monkeypatch):
    root = project(tmp_path, 'cache-dir = "build-cache/npu"')
    write(root / "pkg" / "a.py", CUDA)
    apply("--check", "a.py", cwd=root / "pkg", monkeypatch=monkeypatch)
    assert (root / "build-cache" / "npu" / "CACHEDIR.TAG").is_file()
    assert not (root / "pkg" / "build-cache").exists()
    apply("--check", "--cache-dir", str(tmp_path / "cli-cache"), "a.py", cwd=root / "pkg",
          monkeypatch=monkeypatch)
    assert (tmp_path / "cli-cache" / "CACHEDIR.TAG").is_file()


@pytest.mark.parametrize("respect", [True, False])
def test_respect_gitignore(tmp_path, monkeypatch, respect):
    root = project(tmp_path, f"respect-gitignore = {'true' if respect else 'false'}")
    git(root, "init", "-q")
    write(root / ".gitignore", "generated/\n")
    write(root / "a.py", CUDA)
    write(root / "generated" / "g.py", CUDA)
    result = apply("--check", "--format", "json", ".", cwd=root, monkeypatch=monkeypatch)
    assert summary_of(result)["files_scanned"] == (1 if respect else 2)


BAD = [
    ("selct", '["NPU101"]', "unknown key 'selct' (did you mean 'select'?"),
    ("select", '"NPU101"', "select must be a list of strings"),
    ("ignore", "[1]", "ignore must be a list of strings"),
    ("enable", '["no-such-rule"]', "enable: unknown rule code or name 'no-such-rule'"),
    ("select", '["NPU1O1"]', "select: unknown rule code or name 'NPU1O1'; did you mean 'NPU"),
    ("exclude", '"build"', "exclude must be a list of strings"),
    ("per-file-ignores", '{"a.py" = "NPU101"}', "per-file-ignores must map globs to lists of codes"),
    ("per-file-ignores", '{"a.py" = ["XYZ999"]}', "per-file-ignores.'a.py': unknown rule code or name 'XYZ999'"),
    ("amp-dtype", '"float32"', "amp-dtype must be one of"),
    ("amp-dtype", "16", "amp-dtype must be one of"),
    ("target-version", '"latest"', "target-version must be a torch version"),
    ("target", '"cuda"', "target must be one of npu, portable"),
    ("jobs", "0", "jobs must be a positive integer"),
    ("jobs", "true", "jobs must be a positive integer"),
    ("cache-dir", "1", "cache-dir must be a string"),
    ("respect-gitignore", '"yes"', "respect-gitignore must be true or false"),
]


@pytest.mark.parametrize("key, value, message", BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_bad_keys_and_values_name_the_key_and_exit_2(tmp_path, monkeypatch, key, value, message):
    root = project(tmp_path, f"{key} = {value}")
    write(root / "a.py", CUDA)
    result = apply("--check", "a.py", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("npu-migrate: error: ")
    assert str(root / "pyproject.toml") in result.stderr and "[tool.npu-migrate]" in result.stderr
    assert message in result.stderr
    assert (root / "a.py").read_text() == CUDA  # nothing touched


def test_broken_toml_of_our_section_is_an_error_but_an_unrelated_one_is_skipped(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", "[tool.npu-migrate]\nselect = [\n")
    write(tmp_path / "a.py", CUDA)
    result = apply("--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2 and "invalid TOML" in result.stderr
    write(tmp_path / "pyproject.toml", "[project\nname = 'x'\n")
    assert apply("--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 1


def test_exclude_ignores_folders_above_the_project_and_takes_absolute_globs(tmp_path, monkeypatch):
    root = tmp_path / "build" / "proj"  # a checkout that happens to live under `build/`
    write(root / "pyproject.toml", '[tool.npu-migrate]\nexclude = ["build"]\n')
    write(root / "pkg" / "a.py", CUDA)
    write(root / "pkg" / "build" / "gen.py", CUDA)
    for args in ((".",), (str(root),), (str(root / "pkg" / "a.py"), str(root / "pkg" / "build" / "gen.py"))):
        result = apply("--check", "--format", "json", *args, cwd=root, monkeypatch=monkeypatch)
        assert summary_of(result)["files_scanned"] == 1, args
    absolute = apply("--check", "--format", "json", "--exclude", str(root / "pkg"), ".", cwd=root,
                     monkeypatch=monkeypatch)
    assert summary_of(absolute)["files_scanned"] == 0


def test_snapshot_keys_reach_the_memory_snapshot_rule(tmp_path):
    """snapshot-env / snapshot-max-entries configure NPU420's inserted hook; bad values name the key."""
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text(
        '[tool.npu-migrate]\nenable = ["memory-snapshot"]\nsnapshot-env = "MY_SNAP"\n'
        "snapshot-max-entries = 1234\n")
    (tmp_path / "train.py").write_text(
        "import torch\n\n\ndef main(model, opt):\n    for x in range(3):\n        loss = model(x)\n"
        "        loss.backward()\n        opt.step()\n\n\nif __name__ == '__main__':\n    main()\n")
    run = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "train.py").read_text()
    assert "MY_SNAP" in text and "1234" in text and "NPU_MIGRATE_SNAPSHOT" not in text
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\nsnapshot-max-entries = "many"\n')
    bad = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "snapshot-max-entries" in bad.stderr


@pytest.mark.parametrize("patterns, kept", [
    # a negation re-includes, as in .gitignore
    (["gen/*", "!gen/keep.py"], ["app/gen/x.py", "gen/keep.py", "src/a.py"]),
    # `*` does not cross a folder: `gen/*.py` is gen's own files, not those of its subfolders
    (["gen/*.py"], ["app/gen/x.py", "gen/deep/y.py", "src/a.py"]),
    # `**` does
    (["**/gen/**/*.py"], ["src/a.py"]),
    # a trailing slash matches folders only; a leading one anchors to the project
    (["a.py/"], ["app/gen/x.py", "gen/deep/y.py", "gen/keep.py", "gen/x.py", "src/a.py"]),
    (["/gen"], ["app/gen/x.py", "src/a.py"]),
    (["gen"], ["src/a.py"]),
])
def test_exclude_globs_have_gitignore_semantics(patterns, kept, tmp_path, monkeypatch):
    """What users expect of an exclude list is .gitignore's meaning (issue 29), not fnmatch's, whose
    `*` crosses folders and which has no negation, no `**` and no folder-only patterns."""
    root = project(tmp_path, "exclude = " + json.dumps(patterns))
    for name in ("src/a.py", "gen/x.py", "gen/keep.py", "gen/deep/y.py", "app/gen/x.py"):
        write(root / name, "x = 1\n")
    result = apply("--show-files", ".", cwd=root, monkeypatch=monkeypatch)
    assert sorted(Path(line).as_posix() for line in result.stdout.split()) == kept

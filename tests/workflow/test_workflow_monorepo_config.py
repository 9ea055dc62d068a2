"""Configuration as ruff resolves it: the nearest pyproject.toml ([tool.npu-migrate]) or
npu-migrate.toml to each file, `extend`, a BOM-tolerant reader, `--show-settings`,
`--show-files`; a file's result never depends on which other files are checked with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workflow_helpers import CUDA, apply, write

from codemods.api.registry import all_rules
from npu_migrate.core.config import ConfigError, SettingsFinder, did_you_mean, load_config_file


def monorepo(tmp_path: Path) -> Path:
    """Two packages whose configurations differ: `a` ignores NPU102 (`.is_cuda`), `b` only
    runs NPU102."""
    root = tmp_path / "mono"
    write(root / "pyproject.toml", "[project]\nname = 'mono'\n")
    write(root / "a" / "pyproject.toml", '[tool.npu-migrate]\nignore = ["NPU102"]\n')
    write(root / "b" / "npu-migrate.toml", 'select = ["NPU102"]\n')
    write(root / "a" / "src" / "train.py", CUDA)
    write(root / "b" / "train.py", CUDA)
    return root


def files_of(result) -> dict[str, dict]:
    return {Path(f["path"]).as_posix(): f for f in json.loads(result.stdout)["files"]}


def test_each_file_gets_its_nearest_configuration_whatever_is_checked_with_it(tmp_path, monkeypatch):
    root = monorepo(tmp_path)
    together = files_of(apply("--diff", "--output-format", "json", "--no-cache", "a/src/train.py",
                              "b/train.py", cwd=root, monkeypatch=monkeypatch))
    alone_a = files_of(apply("--diff", "--output-format", "json", "--no-cache", "a/src/train.py",
                             cwd=root, monkeypatch=monkeypatch))
    alone_b = files_of(apply("--diff", "--output-format", "json", "--no-cache", "b/train.py",
                             cwd=root, monkeypatch=monkeypatch))
    folder = files_of(apply("--diff", "--output-format", "json", "--no-cache", ".",
                            cwd=root, monkeypatch=monkeypatch))
    assert together["a/src/train.py"] == alone_a["a/src/train.py"] == folder["a/src/train.py"]
    assert together["b/train.py"] == alone_b["b/train.py"] == folder["b/train.py"]
    # and the configurations really differ in effect
    assert {e["code"] for e in alone_a["a/src/train.py"]["edits"]} >= {"NPU101"}
    assert "NPU102" not in {e["code"] for e in alone_a["a/src/train.py"]["edits"]}
    # b selects NPU102 only; its fix needs `import torch_npu`, which NPU100 adds
    assert {e["code"] for e in alone_b["b/train.py"]["edits"]} == {"NPU100", "NPU102"}


def test_the_same_with_the_cache_and_in_write_mode(tmp_path, monkeypatch):
    root = monorepo(tmp_path)
    apply("a/src/train.py", "b/train.py", cwd=root, monkeypatch=monkeypatch)
    a_text, b_text = (root / "a/src/train.py").read_text(), (root / "b/train.py").read_text()
    assert ".npu()" in a_text and "is_cuda" in a_text
    assert ".cuda()" in b_text and "is_npu" in b_text


def test_npu_migrate_toml_wins_over_pyproject_in_the_same_folder(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.npu-migrate]\nignore = ["NPU101"]\n')
    write(tmp_path / "npu-migrate.toml", 'ignore = ["NPU102"]\n')
    settings = SettingsFinder().for_path(str(write(tmp_path / "x.py", CUDA)))
    assert settings.ignore == ["NPU102"] and settings.source.endswith("npu-migrate.toml")


def test_extend_inherits_and_overrides(tmp_path, monkeypatch):
    write(tmp_path / "base.toml", 'ignore = ["NPU102"]\namp-dtype = "fp16"\ncache-dir = "shared-cache"\n')
    write(tmp_path / "pkg" / "pyproject.toml",
          '[tool.npu-migrate]\nextend = "../base.toml"\namp-dtype = "bf16"\n')
    settings = load_config_file(str(tmp_path / "pkg" / "pyproject.toml"))
    assert settings.ignore == ["NPU102"] and settings.amp_dtype == "bfloat16"
    assert settings.cache_dir == str(tmp_path / "shared-cache")  # relative to the file setting it
    write(tmp_path / "pkg" / "x.py", CUDA)
    shown = apply("--show-settings", "pkg/x.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert shown.exit_code == 0
    assert f"Settings path: {tmp_path / 'pkg' / 'pyproject.toml'}" in shown.stdout
    assert "ignore = ['NPU102']" in shown.stdout and "amp-dtype = 'bfloat16'" in shown.stdout


def test_extend_cycle_and_missing_target_are_errors(tmp_path, monkeypatch):
    write(tmp_path / "one.toml", 'extend = "two.toml"\n')
    write(tmp_path / "two.toml", 'extend = "one.toml"\n')
    with pytest.raises(ConfigError, match="cycle"):
        load_config_file(str(tmp_path / "one.toml"))
    write(tmp_path / "pkg" / "npu-migrate.toml", 'extend = "nowhere.toml"\n')
    write(tmp_path / "pkg" / "a.py", CUDA)
    result = apply("--check", "pkg", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert "extend: 'nowhere.toml' is not a file" in result.stderr and "Traceback" not in result.stderr


def test_a_pyproject_with_a_utf8_bom_is_read(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_bytes(b"\xef\xbb\xbf[tool.npu-migrate]\nignore = ['NPU102']\n")
    write(tmp_path / "a.py", CUDA)
    result = apply("--diff", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1, result.stderr
    assert "+x = torch.ones(2).npu()" in result.stdout and "is_npu" not in result.stdout


def test_show_files_lists_what_would_be_processed(tmp_path, monkeypatch):
    root = monorepo(tmp_path)
    write(root / "a" / "pyproject.toml", '[tool.npu-migrate]\nexclude = ["src"]\n')
    write(root / "b" / "notes.txt", "x.cuda()\n")
    result = apply("--show-files", ".", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["b/train.py"]  # a/src excluded by a's own config
    assert (root / "a/src/train.py").read_text() == CUDA  # nothing was run


def test_did_you_mean_uses_edit_distance():
    rules = all_rules()
    candidates = [r.code for r in rules] + [r.name for r in rules]
    assert did_you_mean("NPU1O1", candidates) == "NPU101"
    assert did_you_mean("cuda-methd", candidates) == "cuda-method"
    assert did_you_mean("completely-unrelated", candidates) is None


@pytest.mark.parametrize("where", ["config", "command line"])
def test_a_code_typo_suggests_the_nearest_code(tmp_path, monkeypatch, where):
    write(tmp_path / "a.py", CUDA)
    if where == "config":
        write(tmp_path / "pyproject.toml", '[tool.npu-migrate]\nselect = ["NPU1O1"]\n')
        result = apply("--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    else:
        result = apply("--check", "--select", "NPU1O1", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert "did you mean 'NPU101'?" in result.stderr and "NPU311" not in result.stderr

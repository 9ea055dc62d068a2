"""Third-party codemods: fixtures/plugin_example is pip-installed (entry point group
`npu_migrate.codemods`) and used through the CLI, composing with the built-in rules:
selection, suppression, diagnostics, the torch_npu import, configuration and cache keys."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from workflow_helpers import CUDA, REPO, apply, cli, write

from codemods.api import registry

SOURCE = """\
import torch
from acme import devices
from acme.kernels import fused_adam_cuda
model = torch.nn.Linear(2, 2).cuda()
dev = devices.cuda_device(0)
keep = devices.cuda_device(1)  # npu-migrate: ignore[EXA101]
fused_adam_cuda(model.parameters())
"""


def env_with(*paths: Path) -> dict[str, str]:
    """PYTHONPATH with these plugin folders, and this checkout's code (not whatever copy of
    npu-migrate the interpreter has installed)."""
    return {"PYTHONPATH": ":".join([*(str(p) for p in paths), str(REPO)])}


@pytest.fixture
def installed(monkeypatch):
    """Put installed plugin folders on this process's sys.path (entry points are found through
    their .dist-info there) for CLI runs in-process; forget them afterwards."""
    def install(*paths: Path) -> None:
        for path in reversed(paths):
            monkeypatch.syspath_prepend(str(path))
        registry.plugin_rules.cache_clear()

    yield install
    registry.plugin_rules.cache_clear()
    registry._ORIGINS.clear()


def test_rules_lists_and_documents_plugin_rules(plugin_path, installed, tmp_path):
    from click.testing import CliRunner

    from npu_migrate.commands.rules import command as rules_command

    listing = cli("rules", cwd=tmp_path, env=env_with(plugin_path))
    assert listing.returncode == 0, listing.stderr
    line = next(row for row in listing.stdout.splitlines() if row.startswith("EXA101"))
    assert "acme-device-helper" in line and " on " in line and "safe" in line
    assert "[plugin: npu-migrate-example-plugin 0.1.0]" in line
    assert any(row.startswith("NPU101") for row in listing.stdout.splitlines())  # built-ins still there
    page = cli("rules", "EXA101", cwd=tmp_path, env=env_with(plugin_path))
    assert page.stdout.startswith("# EXA101: acme-device-helper") and "## Fix safety" in page.stdout
    installed(plugin_path)
    generated = CliRunner().invoke(rules_command, ["acme-fused-adam"])
    assert generated.stdout.startswith("# EXA102: acme-fused-adam")
    assert "NpuFusedAdam" in generated.stdout and "No fix" in generated.stdout
    described = json.loads(CliRunner().invoke(rules_command, ["--format", "json"]).stdout)
    plugin = {d["code"]: d["plugin"] for d in described if d["plugin"]}
    assert plugin == {"EXA101": "npu-migrate-example-plugin 0.1.0",
                      "EXA102": "npu-migrate-example-plugin 0.1.0"}


def test_plugin_rules_run_with_the_builtins(plugin_path, tmp_path):
    target = write(tmp_path / "train.py", SOURCE)
    result = cli("apply", "--diff", "train.py", cwd=tmp_path, env=env_with(plugin_path))
    assert result.returncode == 1
    assert "+model = torch.nn.Linear(2, 2).npu()" in result.stdout  # built-in NPU101
    assert "+dev = devices.npu_device(0)" in result.stdout  # plugin EXA101
    assert "+import torch_npu" in result.stdout  # NPU100 acts on the plugin's edit too
    assert "keep = devices.npu_device(1)" not in result.stdout  # suppressed on its line
    assert "train.py:7:1: EXA102 [error] `fused_adam_cuda` is CUDA-only" in result.stderr
    assert target.read_text() == SOURCE
    written = cli("apply", "--format", "json", "train.py", cwd=tmp_path, env=env_with(plugin_path))
    assert written.returncode == 1  # the error-level diagnostic remains after the rewrite
    payload = json.loads(written.stdout)
    diagnostics = payload["files"][0]["diagnostics"]
    assert [(d["code"], d["severity"], d["line"]) for d in diagnostics] == [("EXA102", "error", 7)]
    assert payload["summary"]["edits_per_rule"]["EXA101"] == 1
    assert "devices.npu_device(0)" in target.read_text()


@pytest.mark.parametrize("options, edited, flagged", [
    # EXA101's fix needs `import torch_npu` (needs_torch_npu): NPU100 adds it unless ignored
    (["--select", "EXA"], {"EXA101", "NPU100"}, True),
    (["--select", "EXA101"], {"EXA101", "NPU100"}, False),
    (["--select", "EXA101", "--ignore", "NPU100"], {"EXA101"}, False),
    (["--ignore", "EXA"], {"NPU100", "NPU101"}, False),
    (["--ignore", "acme-device-helper"], {"NPU100", "NPU101"}, True),
    (["--select", "NPU1"], {"NPU100", "NPU101"}, False),
])
def test_selection_applies_to_plugin_rules(plugin_path, installed, monkeypatch, tmp_path, options,
                                           edited, flagged):
    installed(plugin_path)
    write(tmp_path / "train.py", SOURCE)
    result = apply("--check", "--format", "json", *options, "train.py", cwd=tmp_path,
                   monkeypatch=monkeypatch)
    summary = json.loads(result.stdout)["summary"]
    assert set(summary["edits_per_rule"]) == edited
    assert ("EXA102" in summary["diagnostics_per_code"]) == flagged


def test_plugin_codes_in_configuration(plugin_path, installed, monkeypatch, tmp_path):
    write(tmp_path / "pyproject.toml",
          '[tool.npu-migrate]\nignore = ["EXA102"]\n\n[tool.npu-migrate.per-file-ignores]\n'
          '"legacy/*" = ["acme-device-helper"]\n')
    write(tmp_path / "train.py", SOURCE)
    write(tmp_path / "legacy" / "old.py", SOURCE)
    installed(plugin_path)
    result = apply("--check", "--format", "json", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    files = {f["path"]: f for f in json.loads(result.stdout)["files"]}
    assert {e["code"] for e in files["train.py"]["edits"]} >= {"EXA101"}
    assert "EXA101" not in {e["code"] for e in files["legacy/old.py"]["edits"]}
    assert not any(f["diagnostics"] for f in files.values())
    # without the plugin, its codes in the configuration are an error naming the key
    missing = cli("apply", "--check", ".", cwd=tmp_path)  # a fresh process: no plugin
    assert missing.returncode == 2
    assert "ignore: unknown rule code or name 'EXA102'" in missing.stderr


def test_cache_keys_follow_the_installed_plugins(plugin_path, installed, monkeypatch, tmp_path):
    for i in range(30):  # enough files for the process pool: workers must see the plugin too
        write(tmp_path / f"m{i}.py", SOURCE + f"N = {i}\n")
    args = ("apply", "--check", "--format", "json", "--jobs", "2", ".")

    def run() -> dict:
        return json.loads(apply(*args[1:], cwd=tmp_path, monkeypatch=monkeypatch).stdout)["summary"]

    without = run()
    assert without["files_cached"] == 0 and "EXA101" not in without["edits_per_rule"]
    installed(plugin_path)
    cold = run()
    assert cold["files_cached"] == 0 and cold["edits_per_rule"]["EXA101"] == 30
    assert cold["diagnostics_per_code"]["EXA102"] == 30
    assert run()["files_cached"] == 30
    # an upgraded (here: edited) plugin must not be served its old results
    rules_file = plugin_path / "npu_migrate_example_plugin" / "rules.py"
    rules_file.write_text(rules_file.read_text().replace("`cuda_device()` → `npu_device()`",
                                                         "cuda_device() becomes npu_device()"))
    edited = run()
    assert edited["files_cached"] == 0 and edited["edits_per_rule"]["EXA101"] == 30


def fake_plugin(root: Path, entry: str, module: str = "", code: str = "") -> Path:
    """A hand-made installed distribution: .dist-info with an entry point (what pip writes)."""
    info = root / "npu_migrate_fake-1.0.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: npu-migrate-fake\nVersion: 1.0\n")
    write(info / "entry_points.txt", f"[npu_migrate.codemods]\nfake = {entry}\n")
    if module:
        write(root / f"{module}.py", code)
    return root


BROKEN = [
    ("no_such_module_xyz", "", "", "failed to load: ModuleNotFoundError"),
    ("fake_rules1", "fake_rules1", "raise RuntimeError('boom')\n", "failed to load: RuntimeError: boom"),
    ("fake_rules2:VALUE", "fake_rules2", "VALUE = 3\n", "is neither a Rule subclass"),
    ("fake_rules3", "fake_rules3",
     "from codemods.api.rule import Rule\nclass R(Rule):\n    code = 'NPU999'\n    name = 'r'\n",
     "code NPU999 uses a prefix reserved for built-in rules"),
    ("fake_rules4", "fake_rules4",
     "from codemods.api.rule import Rule\nclass R(Rule):\n    code = 'FAK1'\n    name = 'Bad Name'\n",
     "name 'Bad Name' must be kebab-case"),
    ("fake_rules5", "fake_rules5",
     "from codemods.api.rule import Rule\nclass R(Rule):\n    code = 'EXA101'\n    name = 'dup'\n",
     "rule code EXA101 is defined twice"),
]


@pytest.mark.parametrize("entry, module, code, message", BROKEN, ids=[b[3][:30] for b in BROKEN])
def test_broken_plugins_are_errors_naming_the_plugin(plugin_path, installed, monkeypatch, tmp_path,
                                                     entry, module, code, message):
    from click.testing import CliRunner

    from npu_migrate.commands.rules import command as rules_command

    installed(fake_plugin(tmp_path / "site", entry, module, code), plugin_path)
    write(tmp_path / "a.py", CUDA)
    for result in (CliRunner().invoke(rules_command, []),
                   apply("--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)):
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("npu-migrate: error: ")
        assert message in result.stderr
        if "defined twice" not in message:
            assert "plugin 'fake'" in result.stderr and "npu-migrate-fake 1.0" in result.stderr
    assert (tmp_path / "a.py").read_text() == CUDA
    sys.modules.pop(module, None)


def test_plugin_diagnostics_in_sarif(plugin_path, installed, monkeypatch, tmp_path):
    installed(plugin_path)
    write(tmp_path / "train.py", SOURCE)
    result = apply("--check", "--format", "sarif", "train.py", cwd=tmp_path, monkeypatch=monkeypatch)
    run = json.loads(result.stdout)["runs"][0]
    found = [(r["ruleId"], r["level"]) for r in run["results"]]
    assert ("EXA102", "error") in found
    assert "EXA102" in {rule["id"] for rule in run["tool"]["driver"]["rules"]}

"""`npu-migrate apply` end to end: in-process through click, and as a real subprocess."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main

CUDA = "import torch\n\n\ndef f(x):\n    return x.cuda()\n"
MIGRATED = "import torch\nimport torch_npu  # noqa: F401\n\n\ndef f(x):\n    return x.npu()\n"
PLAIN = "import os\nprint(os.getcwd())\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(CUDA)
    (tmp_path / "pkg" / "plain.py").write_text(PLAIN)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(main, ["apply", "--no-cache", "--isolated", "--select", "NPU10", *map(str, args)])


def test_check_reports_and_writes_nothing(project):
    result = invoke(project, "--check")
    assert result.exit_code == 1
    assert f"would migrate {project / 'pkg' / 'a.py'}" in result.output
    assert (project / "pkg" / "a.py").read_text() == CUDA


def test_diff_prints_a_patch_and_fails(project):
    result = invoke(project, "--diff")
    assert result.exit_code == 1
    assert "-    return x.cuda()\n+    return x.npu()\n" in result.stdout
    assert "\x1b[" not in result.stdout


def test_dry_run_writes_nothing(project):
    result = invoke(project, "--dry-run")
    assert "+import torch_npu" in result.stdout
    assert (project / "pkg" / "a.py").read_text() == CUDA


def test_apply_writes_then_check_passes_and_plain_file_is_byte_identical(project):
    before = (project / "pkg" / "plain.py").read_bytes()
    assert invoke(project).exit_code == 0
    assert (project / "pkg" / "a.py").read_text() == MIGRATED
    assert (project / "pkg" / "plain.py").read_bytes() == before
    again = invoke(project, "--check")
    assert again.exit_code == 0, again.output


def test_output_dir_leaves_sources_untouched(project, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "migrated"
    assert invoke(project / "pkg", "--output-dir", out).exit_code == 0
    assert (project / "pkg" / "a.py").read_text() == CUDA
    assert (out / "a.py").read_text() == MIGRATED
    assert (out / "plain.py").read_text() == PLAIN


def test_bad_file_is_reported_and_the_rest_migrated(project):
    (project / "pkg" / "broken.py").write_text("x = y.cuda(\n")
    result = invoke(project)
    assert result.exit_code == 1
    assert f"{project / 'pkg' / 'broken.py'}:1:" in result.output and "syntax error" in result.output
    assert (project / "pkg" / "broken.py").read_text() == "x = y.cuda(\n"
    assert (project / "pkg" / "a.py").read_text() == MIGRATED


def test_json_format(project):
    result = invoke(project, "--check", "--format", "json")
    payload = json.loads(result.stdout)
    assert payload["summary"]["files_scanned"] == 2 and payload["summary"]["files_changed"] == 1
    (entry,) = payload["files"]
    assert [(e["code"], e["line"]) for e in entry["edits"]] == [("NPU100", 2), ("NPU101", 5)]


def test_select_and_ignore(project):
    result = invoke(project, "--ignore", "NPU101", "--check")
    assert result.exit_code == 0  # nothing left to do without NPU101
    result = CliRunner().invoke(main, ["apply", "--isolated", "--no-cache", "--select", "NPU999", str(project)])
    assert result.exit_code == 2
    assert "unknown rule code or name: 'NPU999'" in result.output


def test_usage_errors_exit_2(project):
    assert CliRunner().invoke(main, ["apply"]).exit_code == 2
    result = CliRunner().invoke(main, ["apply", "--isolated", str(project / "missing")])
    assert result.exit_code == 2 and "missing: no such file or directory" in result.output
    assert CliRunner().invoke(main, ["apply", str(project), "--check", "--diff"]).exit_code == 2


def test_stdin_to_stdout():
    result = CliRunner().invoke(main, ["apply", "--isolated", "--select", "NPU10", "-"], input="y = x.cuda()\n")
    assert result.exit_code == 0
    assert result.stdout == "import torch_npu  # noqa: F401\ny = x.npu()\n"


def test_gitignored_and_venv_files_are_skipped(project):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("ignored.py\n")
    (project / "ignored.py").write_text(CUDA)
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "lib" / "x.py").write_text(CUDA)
    result = invoke(project, "--check", "--format", "json")
    assert [os.path.basename(f["path"]) for f in json.loads(result.stdout)["files"]] == ["a.py"]


def test_real_subprocess_dry_run_on_the_demo(tmp_path):
    demo = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "cuda_project")
    copy = tmp_path / "demo"
    shutil.copytree(demo, copy)
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", str(copy), "--dry-run",
                             "--no-cache", "--isolated"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "+import torch_npu  # noqa: F401" in result.stdout
    assert "would change" in result.stderr
    assert subprocess.run(["git", "diff", "--no-index", "--quiet", demo, str(copy)]).returncode == 0


def test_sarif_format_lists_pending_fixes_and_failures(project):
    (project / "pkg" / "broken.py").write_text("x = y.cuda(\n")
    result = invoke(project, "--check", "--format", "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    found = {(r["ruleId"], r["level"]) for r in log["runs"][0]["results"]}
    assert ("NPU101", "warning") in found and ("NPU000", "error") in found


def test_a_folder_walk_reads_yaml_configs_and_skips_plain_text(tmp_path):
    # a merge once left every YAML file that is not a conda environment out of a folder walk, so
    # NPU541 saw only configs named on the command line (BasicSR's `backend: nccl`, issue 25)
    (tmp_path / "options").mkdir()
    (tmp_path / "options" / "train.yml").write_text("dist_params:\n  backend: nccl\n")
    (tmp_path / "notes.txt").write_text("backend: nccl\n")
    result = CliRunner().invoke(main, ["apply", "--no-cache", "--isolated", "--select", "NPU541", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "options" / "train.yml").read_text() == "dist_params:\n  backend: hccl\n"
    assert (tmp_path / "notes.txt").read_text() == "backend: nccl\n"

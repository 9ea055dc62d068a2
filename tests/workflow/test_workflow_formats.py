"""Output like ruff's: severity on every text line and a summary by severity, the output
formats, --output-file, --statistics, --exit-zero, --fix, and a missing path that costs only
itself."""

from __future__ import annotations

import json
import re

from workflow_helpers import CUDA, apply, write

# an error-level diagnostic (NPU201: device ids not ascending), a warning (NPU302: FusedLAMB has no
# exact torch route) and rewrites
MIXED = ("import os\nimport torch\nfrom apex.optimizers import FusedLAMB\nopt = FusedLAMB([])\n"
         "x = torch.ones(2).cuda()\nos.environ['CUDA_VISIBLE_DEVICES'] = '1,0'\n")
# GitHub workflow command: ::level file=…,line=…,col=…,title=…::message (properties escaped)
GITHUB = re.compile(r"^::(error|warning|notice) file=[^,:]+(,line=\d+)?(,col=\d+)?(,endLine=\d+)?"
                    r",title=[A-Z]+\d+::\S.*$")


def diagnostics_of(tmp_path, monkeypatch, edits: bool = False):
    write(tmp_path / "train.py", MIXED)
    payload = json.loads(apply("--check", "--output-format", "json", "--no-cache", "train.py",
                               cwd=tmp_path, monkeypatch=monkeypatch).stdout)
    found = payload["files"][0]["diagnostics"]
    return (found, payload["files"][0]["edits"]) if edits else found


def test_text_lines_carry_the_severity_and_the_summary_counts_by_severity(tmp_path, monkeypatch):
    found = diagnostics_of(tmp_path, monkeypatch)
    assert {d["severity"] for d in found} == {"error", "warning"}, found
    result = apply("--check", "--no-cache", "train.py", cwd=tmp_path, monkeypatch=monkeypatch)
    for d in found:
        assert (f"train.py:{d['line']}:{d['col']}: {d['code']} [{d['severity']}] {d['message']} "
                f"(npu-migrate rules {d['code']})") in result.stdout
    errors = sum(d["severity"] == "error" for d in found)
    warnings = sum(d["severity"] == "warning" for d in found)
    assert re.search(rf"{len(found)} diagnostics?: {errors} errors?, {warnings} warnings?, \d+ info",
                     result.stderr), result.stderr
    assert result.exit_code == 1
    # the exit code explained
    assert f"exit 1: 1 file(s) would change (--check); {errors} error-level diagnostic(s)" in result.stderr


def test_concise_has_no_doc_pointer_and_grouped_groups_by_file(tmp_path, monkeypatch):
    found, edits = diagnostics_of(tmp_path, monkeypatch, edits=True)
    concise = apply("--output-format", "concise", "--check", "train.py", cwd=tmp_path,
                    monkeypatch=monkeypatch)
    lines = [line for line in concise.stdout.splitlines() if line.startswith("train.py:")]
    assert len(lines) == len(found) + len(edits)  # each diagnostic and each pending rewrite
    assert sum("fixable: " in line for line in lines) == len(edits)
    assert not any("npu-migrate rules" in line for line in lines)
    grouped = apply("--output-format", "grouped", "--check", "train.py", cwd=tmp_path,
                    monkeypatch=monkeypatch)
    out = grouped.stdout.splitlines()
    assert out[0] == "train.py:" and all(line.startswith("  ") for line in out[1:])


def test_github_annotations(tmp_path, monkeypatch):
    found = diagnostics_of(tmp_path, monkeypatch)
    write(tmp_path / "odd, name.py", CUDA)
    result = apply("--output-format", "github", "--check", "train.py", "odd, name.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    lines = result.stdout.splitlines()
    assert lines and all(GITHUB.match(line) for line in lines), lines
    levels = {"error": "error", "warning": "warning", "info": "notice"}
    for d in found:
        assert (f"::{levels[d['severity']]} file=train.py,line={d['line']},col={d['col']},"
                f"title={d['code']}::{d['code']} ") in result.stdout
    # a comma in a file name is escaped, so GitHub does not read it as the next property
    assert any(line.startswith("::warning file=odd%2C name.py,line=") for line in lines)


def test_gitlab_code_quality_report(tmp_path, monkeypatch):
    found, edits = diagnostics_of(tmp_path, monkeypatch, edits=True)
    result = apply("--output-format", "gitlab", "train.py", "--check", cwd=tmp_path, monkeypatch=monkeypatch)
    report = json.loads(result.stdout)
    assert len(report) == len(found) + len(edits)  # + the pending rewrites
    for issue in report:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["path"] == "train.py" and issue["location"]["lines"]["begin"] >= 1
    assert len({issue["fingerprint"] for issue in report}) == len(report)
    again = json.loads(apply("--output-format", "gitlab", "--check", "train.py", cwd=tmp_path,
                             monkeypatch=monkeypatch).stdout)
    assert [i["fingerprint"] for i in again] == [i["fingerprint"] for i in report]  # stable


def test_output_file_statistics_and_exit_zero(tmp_path, monkeypatch):
    found = diagnostics_of(tmp_path, monkeypatch)
    result = apply("--check", "--output-format", "json", "--output-file", "report.json", "train.py",
                   cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.stdout == ""
    assert json.loads((tmp_path / "report.json").read_text())["files"][0]["diagnostics"] == found
    stats = apply("--check", "--statistics", "train.py", cwd=tmp_path, monkeypatch=monkeypatch)
    rows = stats.stdout.splitlines()
    assert rows and all(re.match(r"^\s*\d+  [A-Z]+\d+\s+\[(error|warning|info|fixable)\]", r) for r in rows)
    assert sum(int(r.split()[0]) for r in rows if "[fixable]" not in r) == len(found)
    assert "train.py:" not in stats.stdout  # counts instead of each diagnostic
    assert stats.exit_code == 1
    zero = apply("--check", "--exit-zero", "train.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert zero.exit_code == 0 and "(--exit-zero)" in zero.stderr
    assert (tmp_path / "train.py").read_text() == MIXED


def test_fix_is_the_write_mode_and_format_is_a_deprecated_alias(tmp_path, monkeypatch):
    write(tmp_path / "a.py", CUDA)
    legacy = apply("--check", "--format", "json", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert json.loads(legacy.stdout)["summary"]["files_changed"] == 1
    assert "--format is deprecated; use --output-format" in legacy.stderr
    assert apply("--fix", "--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 2
    fixed = apply("--fix", "a.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert fixed.exit_code == 0 and ".npu()" in (tmp_path / "a.py").read_text()


def test_a_missing_path_is_one_line_and_the_rest_is_processed(tmp_path, monkeypatch):
    write(tmp_path / "a.py", CUDA)
    result = apply("nowhere", "a.py", "gone.py", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert ".npu()" in (tmp_path / "a.py").read_text()  # the rest still processed
    errors = [line for line in result.stderr.splitlines() if line.startswith("npu-migrate:")]
    assert errors == ["npu-migrate: error: nowhere: no such file or directory",
                      "npu-migrate: error: gone.py: no such file or directory"]
    assert "Traceback" not in result.stderr


def test_an_explicit_file_is_processed_whatever_its_suffix(tmp_path, monkeypatch):
    write(tmp_path / "train.txt", CUDA)
    write(tmp_path / "launch.bash", "export CUDA_VISIBLE_DEVICES=0\n")
    result = apply("train.txt", "launch.bash", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert ".npu()" in (tmp_path / "train.txt").read_text()  # read as Python
    assert "ASCEND_RT_VISIBLE_DEVICES" in (tmp_path / "launch.bash").read_text()  # as shell
    folder = apply("--check", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "train.txt" not in folder.stdout  # a folder yields only known suffixes


def test_standard_input_keeps_stdout_for_the_code_and_annotates_on_stderr(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--check", "--output-format", "github",
                                          "--stdin-filename", "s.py", "-"], input=CUDA)
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines and all(GITHUB.match(line) for line in lines)
    assert re.search(r"^::warning file=s.py,line=2,col=\d+,title=NPU101::NPU101 fixable: ", result.stderr, re.M)
    gitlab = CliRunner().invoke(command, ["--diff", "--output-format", "gitlab", "-"], input=CUDA)
    assert {issue["check_name"] for issue in json.loads(gitlab.stdout)} >= {"NPU101"}


def test_an_output_file_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    write(tmp_path / "a.py", CUDA)
    result = apply("--check", "-o", str(tmp_path / "missing" / "out.txt"), "a.py", cwd=tmp_path,
                   monkeypatch=monkeypatch)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("npu-migrate: error: --output-file ")

"""The README and the workflow docs say what the tool does: CI runs the README's commands, the
options and formats they name exist, the configuration keys they list are the ones accepted,
and the pre-commit `rev` they show is not a tag that does not exist."""

from __future__ import annotations

import re
import tomllib

from click.testing import CliRunner

from npu_migrate.commands.apply import command as apply_command
from npu_migrate.core import config, formats
from npu_migrate.core.diagnostics import Diagnostic, Severity

from workflow_helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def readme_block_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    opening = readme_block_after("# npu-migrate")
    assert opening == ["pip install -e . && npu-migrate apply fixtures/cuda_project --dry-run",
                       "pip install -e '.[test]' && python -m pytest"]
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == opening[1]
    # the longer recipe for other machines ends with the same command
    assert readme_block_after("## Running the tests")[-1] == opening[1]


def test_default_run_leaves_out_slow_and_network_and_the_readme_says_how_to_run_them():
    pytest_config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-m 'not slow and not network'" in pytest_config["addopts"]
    assert {m.split(":")[0] for m in pytest_config["markers"]} == {"slow", "network"}
    assert 'python -m pytest -m "slow or network"' in README


def test_python_version_and_torch_cpu_wheel_are_stated():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11" and "Python 3.11 or newer" in README
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in README
    assert "torch==2.13.0" in project["optional-dependencies"]["test"]


def test_every_option_and_format_the_readme_names_exists():
    from npu_migrate.cli import main

    runner = CliRunner()
    helps = {name: runner.invoke(main, [*name.split(), "--help"], terminal_width=200).output
             for name in ("apply", "analyze", "verify", "memory report", "rules")}
    help_text = "\n".join(helps.values())
    for option in set(re.findall(r"`(--[a-z-]+)", README)) - {"--format"}:
        assert option in help_text, option
    # --format: analyze's option, and apply's deprecated (hidden) alias of --output-format
    assert "--format" in helps["analyze"]
    assert runner.invoke(apply_command, ["--format", "json", "--help"]).exit_code == 0
    named = re.search(r"`--output-format ([a-z|]+)`", README)
    assert named and tuple(named.group(1).split("|")) == formats.FORMATS


def test_the_diagnostic_format_shown_is_the_one_printed():
    line = formats.text_line(Diagnostic("NPU201", "msg", "p.py", 3, 4, Severity.ERROR))
    assert line == "p.py:3:4: NPU201 [error] msg (npu-migrate rules NPU201)"
    shown = "`path:line:col: CODE [severity] message (npu-migrate rules CODE)`"
    assert shown in README and shown in (REPO / "docs" / "pre-commit.md").read_text()


def test_configuration_keys_documented_are_the_keys_accepted():
    page = (REPO / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", page, re.MULTILINE))
    assert documented == config._KNOWN


def test_no_pre_commit_rev_names_a_tag_that_does_not_exist():
    for path in (REPO / "docs" / "pre-commit.md", REPO / ".pre-commit-hooks.yaml", REPO / "README.md"):
        assert not re.search(r"rev: v\d", path.read_text()), path
    assert "commit SHA" in (REPO / "docs" / "pre-commit.md").read_text()


def test_the_configuration_error_examples_are_what_is_printed(tmp_path, monkeypatch):
    from workflow_helpers import apply, write

    page = (REPO / "docs" / "configuration.md").read_text()
    examples = re.findall(r"^npu-migrate: error: /repo/pyproject.toml: .*$", page, re.MULTILINE)
    tables = {"selct": 'selct = ["NPU101"]', "jobs": "jobs = 0",
              "per-file-ignores": '[tool.npu-migrate.per-file-ignores]\n"tests/*" = ["NPU1O1"]'}
    assert len(examples) == len(tables)
    write(tmp_path / "a.py", "x = 1\n")
    for example, table in zip(examples, tables.values()):
        write(tmp_path / "pyproject.toml", f"[tool.npu-migrate]\n{table}\n")
        printed = apply("--check", "a.py", cwd=tmp_path, monkeypatch=monkeypatch).stderr.strip()
        printed = printed.replace(str(tmp_path / "pyproject.toml"), "/repo/pyproject.toml")
        if example.endswith("known: ...)"):
            assert printed.startswith(example[:-len("...)")]), printed
        else:
            assert printed == example

"""Every MEM code the analyzer can print has its page in npu_migrate/memory/data/codes.toml, with
an Example whose command, run on the committed inputs, prints exactly the finding line shown."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.core.codes import pages
from npu_migrate.memory.data_tables import TABLES

from .code_examples import COMMANDS, build

REPO = Path(__file__).resolve().parents[2]
WING = REPO / "npu_migrate" / "memory"
CODES = pages(TABLES)
SECTIONS = ("## What it means", "## Why", "## Evidence", "## What to do", "## Example")
EXAMPLE = re.compile(r"## Example\n```\n\$ npu-migrate memory (?P<args>[^\n]+)\n(?P<line>[^\n]+)"
                     r"\n```")


def test_every_printed_code_is_documented():
    printed = set()
    for path in WING.glob("*.py"):
        printed |= set(re.findall(r'"(MEM\d{3})"', path.read_text()))
    assert printed and printed <= set(CODES), printed - set(CODES)
    assert set(COMMANDS) == set(CODES)


def test_pages_have_title_and_sections():
    for code, page in CODES.items():
        assert page.splitlines()[0].startswith(f"# {code} ")
        positions = [page.index(s) for s in SECTIONS]
        assert positions == sorted(positions), code


@pytest.mark.parametrize("code", sorted(CODES))
def test_example_is_what_the_command_prints(code, monkeypatch):
    match = EXAMPLE.search(CODES[code])
    assert match, f"{code}: no example"
    assert match["args"].split() == COMMANDS[code]
    monkeypatch.chdir(REPO)  # the example's paths are relative to the repository
    result = CliRunner().invoke(command, match["args"].split())
    assert result.exit_code == 0, result.output
    assert match["line"] in result.output.splitlines(), result.output
    assert f" {code} " in match["line"]


def test_example_inputs_are_what_the_generator_writes(tmp_path):
    for made in build(tmp_path):
        committed = REPO / "fixtures" / "memory" / "examples" / made.name
        assert made.read_bytes() == committed.read_bytes(), made.name
    assert all(os.path.getsize(p) < 100_000 for p in (REPO / "fixtures" / "memory" / "examples")
               .iterdir())

"""Claims the README and docs/ make about names a reader types or looks for: every option they
show is one the command takes, every file path they name exists, every diagnostic code they cite
is one the tool has (issue 29: "every claim that a command can check is checked by a test").
Pages another helper owns this round (engine, emulation, verify, memory, monorepo) have their own
tests."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from workflow_helpers import REPO

OWN_TESTS = {"engine.md", "emulation.md", "verify.md", "memory.md", "monorepo.md"}
PAGES = [REPO / "README.md", *(p for p in sorted((REPO / "docs").glob("*.md")) if p.name not in OWN_TESTS)]
IDS = [str(p.relative_to(REPO)) for p in PAGES]
# flags of the user's programs that the rules rewrite or report (shown as what they find), and of
# the benchmark scripts a page names
NOT_OURS = {"--no-cuda", "--dist-backend", "--backend", "--ddp_backend", "--deepspeed", "--deepspeed_config",
            "--propose", "--precision",
            # the launch-script flags of the catalogue's option entries (NPU258), as the regex below cuts them
            *(re.match(r"--[a-z][a-z_-]*", flag).group(0)
              for entry in json.loads((REPO / "codemods" / "data" / "cuda_only.json").read_text("utf-8"))["entries"]
              for flag in entry.get("flags", ()))}
# names that stand for any file (a placeholder) or for a file of the user's project in an example
EXAMPLES = {"docs/CODE.md", "docs/rules/CODE.md", "docs/rules/NPU999.md", "cldm/model.py", "src/pkg/env.py"}
EXAMPLE_CODES = {"NPU999"}  # the code of the example rule docs/rules-adding.md walks through


@pytest.fixture(scope="module")
def helps() -> str:
    from npu_migrate.cli import main

    runner = CliRunner()
    commands = ("apply", "analyze", "verify", "rules", "memory report", "memory blocks", "memory events",
                "memory pool", "memory compare")
    return "\n".join(runner.invoke(main, [*name.split(), "--help"], terminal_width=200).output for name in commands)


def spans(page) -> list[str]:
    return re.findall(r"`([^`\n]+)`", page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_option_shown_is_taken(page, helps):
    for span in spans(page):
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z_-]*)", span):
            assert option in helps or option in NOT_OURS, f"{page.name}: `{span}`: {option} is no option"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_path_named_exists(page):
    for span in spans(page):
        if re.fullmatch(r"[\w./-]+/[\w.-]+\.(?:py|json|md|tsv|toml|ya?ml|txt|js|css|html|sh)", span):
            exists = (REPO / span).exists() or (page.parent / span).exists()
            assert exists or span in EXAMPLES, f"{page.name}: {span} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_code_cited_exists(page):
    from codemods.api.registry import all_rules
    from npu_migrate.commands.docgen import wing_pages

    known = {r.code for r in all_rules()} | set(wing_pages()) | EXAMPLE_CODES
    text = page.read_text(encoding="utf-8")
    ranges = {code for pair in re.findall(r"\b((?:NPU|ANA)\d{3})\s*[-–]\s*((?:NPU|ANA)\d{3})\b", text) for code in pair}
    for code in set(re.findall(r"\b(?:NPU|ANA|MEM|VER)\d{3}\b", text)) - ranges:
        assert code in known, f"{page.name}: {code} is no code of the tool"

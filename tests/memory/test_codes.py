"""Every MEM code the analyzer can print has its page in npu_migrate/memory/codes.py."""

from __future__ import annotations

import re
from pathlib import Path

from npu_migrate.memory.codes import CODES

WING = Path(__file__).resolve().parents[2] / "npu_migrate" / "memory"
SECTIONS = ("## What it means", "## Why", "## Evidence", "## What to do")


def test_every_printed_code_is_documented():
    printed = set()
    for path in WING.glob("*.py"):
        if path.name != "codes.py":
            printed |= set(re.findall(r'"(MEM\d{3})"', path.read_text()))
    assert printed and printed <= set(CODES), printed - set(CODES)


def test_pages_have_title_and_sections():
    for code, page in CODES.items():
        assert page.splitlines()[0].startswith(f"# {code} ")
        positions = [page.index(s) for s in SECTIONS]
        assert positions == sorted(positions), code

"""Helpers shared by the tests of the issue-3 coverage rules (NPU150-NPU199)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from npu_migrate.apply.engine import FileOutcome, RuleSet, migrate_text
from codemods.framework.registry import all_rules, select_rules

DATA = Path(__file__).resolve().parents[2] / "codemods" / "data"
NAME_FILES = ("coverage_tensors.json", "coverage_memory.json", "coverage_backends.json",
              "coverage_profiler.json", "coverage_graphs.json")


def data(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def name_entries() -> list[tuple[str, dict]]:
    """(data file, entry) for every entry matched by qualified name."""
    return [(name, entry) for name in NAME_FILES for entry in data(name)["entries"]
            if entry.get("match", "name") == "name"]


def migrate(src: str, codes: list[str] | None = None, path: str = "t.py") -> FileOutcome:
    """Run the given rules (plus NPU100, which adds `import torch_npu`), or the default set."""
    rules = select_rules(all_rules(), select=[*codes, "NPU100"]) if codes else select_rules(all_rules())
    outcome = migrate_text(src, path, RuleSet(rules))
    assert outcome.error is None, outcome.error
    return outcome


def after(src: str, codes: list[str] | None = None) -> str:
    outcome = migrate(src, codes)
    text = outcome.new_text if outcome.new_text is not None else src
    ast.parse(text)
    return text


def codes_at(outcome: FileOutcome) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in outcome.diagnostics]


def assert_idempotent(src: str, codes: list[str] | None = None) -> None:
    once = after(src, codes)
    assert after(once, codes) == once


def test_every_coverage_data_file_is_read_by_these_tests() -> None:
    """A new coverage_*.json must be added to NAME_FILES (or be a call-only file)."""
    call_only = {"coverage_devices.json"}
    assert {p.name for p in DATA.glob("coverage_*.json")} == set(NAME_FILES) | call_only

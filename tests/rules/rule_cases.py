"""The scaffolding every rule test shares (a uniquely named module: `conftest` names clash
between test folders): run chosen rules over a text, read what they did."""

from __future__ import annotations

import ast
import copy
from types import SimpleNamespace

from codemods.api.cases import Invalid, Valid
from codemods.api.registry import all_rules, select_rules
from codemods.data.tables import load_data
from npu_migrate.apply.engine import FileOutcome, RuleSet, migrate_text

# the coverage tables whose entries the name rules match by qualified name
NAME_FILES = ("coverage_tensors.json", "coverage_memory.json", "coverage_backends.json",
              "coverage_profiler.json", "coverage_graphs.json")


def migrate(src: str, codes=None, path: str = "t.py", *, with_import: bool = False, enable=(),
            options=None) -> FileOutcome:
    """Run exactly `codes` (the default set when None; plus NPU100, which adds
    `import torch_npu`, with `with_import`; plus the opt-in rules `enable`, with `options`) over
    `src`; the file must not fail."""
    select = [*codes, *(["NPU100"] if with_import else [])] if codes else []
    # exactly `codes`: a fix needing torch_npu would bring NPU100, as `--select` does
    ignore = ["NPU100"] if codes and not with_import and "NPU100" not in codes else []
    rules = select_rules(all_rules(), select=select, ignore=ignore, enable=list(enable))
    outcome = migrate_text(src, path, RuleSet(rules, options or {}))
    assert outcome.error is None, outcome.error
    return outcome


def after(src: str, codes=None, path: str = "t.py", *, with_import: bool = False) -> str:
    """The migrated text (the input itself when nothing changed); Python results must parse."""
    outcome = migrate(src, codes, path, with_import=with_import)
    text = outcome.new_text if outcome.new_text is not None else src
    if path.endswith(".py"):
        ast.parse(text)
    return text


def for_codes(default=None, *, with_import: bool = False, path: str = "t.py") -> SimpleNamespace:
    """`migrate`, `after` and `assert_idempotent` with a test module's default rules."""

    def bound_migrate(src: str, codes=default, path: str = path) -> FileOutcome:
        return migrate(src, codes, path, with_import=with_import)

    def bound_after(src: str, codes=default, path: str = path) -> str:
        return after(src, codes, path, with_import=with_import)

    def assert_idempotent(src: str, codes=default) -> None:
        once = bound_after(src, codes)
        assert bound_after(once, codes) == once

    return SimpleNamespace(migrate=bound_migrate, after=bound_after, assert_idempotent=assert_idempotent)


def codes_at(outcome: FileOutcome) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in outcome.diagnostics]


def codes_with_severity(outcome: FileOutcome) -> list[tuple[str, int, str]]:
    return [(d.code, d.line, d.severity.value) for d in outcome.diagnostics]


def data(name: str) -> dict:
    """A data table, a copy a test may change."""
    return copy.deepcopy(load_data(name))


def name_entries() -> list[tuple[str, dict]]:
    """(data file, entry) for every entry matched by qualified name."""
    return [(name, entry) for name in NAME_FILES for entry in data(name)["entries"]
            if entry.get("match", "name") == "name"]


def run_case(code: str, case: Valid | Invalid, source: str) -> FileOutcome:
    """One rule's case: the rule (plus the case's `with_rules`) over `source`."""
    return migrate(source, [code, *case.with_rules], case.path, options=dict(case.options))

"""Shared helpers for rule tests (a uniquely named module: `conftest` names clash between
test folders)."""

from codemods.framework.cases import Invalid, Valid
from codemods.framework.registry import all_rules, select_rules
from npu_migrate.apply.engine import FileOutcome, RuleSet, migrate_text


def migrate(src: str, codes, path: str = "t.py") -> FileOutcome:
    """Run exactly `codes` over `src`; the file must not fail."""
    outcome = migrate_text(src, path, RuleSet(select_rules(all_rules(), select=codes)))
    assert outcome.error is None, outcome.error
    return outcome


def after(src: str, codes, path: str = "t.py") -> str:
    """The migrated text (the input itself when nothing changed)."""
    outcome = migrate(src, codes, path)
    return outcome.new_text if outcome.new_text is not None else src


def run_case(code: str, case: Valid | Invalid, source: str) -> FileOutcome:
    """One rule's case: the rule (plus the case's `with_rules`) over `source`."""
    return migrate(source, [code, *case.with_rules], case.path)

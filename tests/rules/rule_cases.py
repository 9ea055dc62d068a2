"""Shared helpers for rule tests (a uniquely named module: `conftest` names clash between
test folders)."""

from npu_migrate.apply.engine import FileOutcome, RuleSet, migrate_text
from codemods.framework.registry import all_rules, select_rules


def migrate(src: str, codes) -> FileOutcome:
    """Run exactly `codes` over `src`; the file must not fail."""
    outcome = migrate_text(src, "t.py", RuleSet(select_rules(all_rules(), select=codes)))
    assert outcome.error is None, outcome.error
    return outcome


def after(src: str, codes) -> str:
    """The migrated text (the input itself when nothing changed)."""
    outcome = migrate(src, codes)
    return outcome.new_text if outcome.new_text is not None else src

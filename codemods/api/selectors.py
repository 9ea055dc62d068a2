"""Choosing rules by code, prefix or name, over anything that has a `code`, a `name` and a
`default`: the rule classes, or the run's catalogue of them (`npu_migrate/apply/catalogue.py`),
which a run served from its cache reads instead of importing every rule. Also where plugins
register, so that the catalogue's key can follow them without importing them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

ENTRY_POINT_GROUP = "npu_migrate.codemods"


class RuleError(ValueError):
    """A bad rule selection or a broken plugin."""


class Selectable(Protocol):
    @property
    def code(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def default(self) -> bool: ...


R = TypeVar("R", bound=Selectable)


def selector_matches(rule: Selectable, selector: str) -> bool:
    """True when `selector` (a code, a code prefix, a rule name or ALL) names `rule`."""
    selector = selector.strip()
    return (selector.upper() == "ALL" or rule.code.startswith(selector.upper())
            or rule.name == selector.lower())


def select_rules(rules: Iterable[R], select: Iterable[str] = (), ignore: Iterable[str] = (),
                 enable: Iterable[str] = ()) -> list[R]:
    """Default rules, or exactly `select` when given; plus opt-in `enable`; minus `ignore`.
    Every selector must match some rule (a typo is an error, not a silent no-op)."""
    rules = list(rules)
    select, ignore, enable = list(select), list(ignore), list(enable)
    for selector in select + ignore + enable:
        if not any(selector_matches(rule, selector) for rule in rules):
            raise RuleError(f"unknown rule code or name: {selector!r} (see `npu-migrate rules`)")
    if select:
        chosen = [r for r in rules if any(selector_matches(r, s) for s in select)]
        # a prefix or ALL selects opt-in rules only when it names them exactly
        chosen = [r for r in chosen if r.default or any(s.upper() == r.code or s.lower() == r.name
                                                        for s in select)]
    else:
        chosen = [r for r in rules if r.default]
    chosen += [r for r in rules if any(selector_matches(r, s) for s in enable) and r not in chosen]
    return [r for r in chosen if not any(selector_matches(r, s) for s in ignore)]

"""Choosing rules by code, prefix or name, over anything that has a `code`, a `name` and a
`default`: the rule classes, or the run's catalogue of them (`npu_migrate/apply/catalogue.py`),
which a run served from its cache reads instead of importing every rule. Also where plugins
register, so that the catalogue's key can follow them without importing them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from npu_migrate.core.diagnostics import shown

ENTRY_POINT_GROUP = "npu_migrate.codemods"
# rule option: the codes the run's `ignore` lists (command line, configuration, per-file-ignores)
# switched off; a final sweep does not report what they would have handled (`switched_off_option`)
SWITCHED_OFF = "switched_off"


class RuleError(ValueError):
    """A bad rule selection or a broken plugin."""


class Selectable(Protocol):
    @property
    def code(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def default(self) -> bool: ...

    @property
    def families(self) -> frozenset[str] | tuple[str, ...]: ...

    @property
    def needs_torch_npu(self) -> bool: ...

    @property
    def adds_torch_npu_import(self) -> bool: ...


R = TypeVar("R", bound=Selectable)


def selector_matches(rule: Selectable, selector: str) -> bool:
    """True when `selector` (a code, a code prefix, a rule name, a family name or ALL) names
    `rule`."""
    selector = selector.strip()
    return (selector.upper() == "ALL" or rule.code.startswith(selector.upper())
            or rule.name == selector.lower() or selector.lower() in rule.families)


def select_rules(rules: Iterable[R], select: Iterable[str] = (), ignore: Iterable[str] = (),
                 enable: Iterable[str] = ()) -> list[R]:
    """Default rules, or exactly `select` when given; plus opt-in `enable`; minus `ignore`.
    Every selector must match some rule (a typo is an error, not a silent no-op)."""
    rules = list(rules)
    select, ignore, enable = list(select), list(ignore), list(enable)
    for selector in select + ignore + enable:
        if not any(selector_matches(rule, selector) for rule in rules):
            raise RuleError(f"unknown rule code or name: {shown(selector)} (see `npu-migrate rules`)")
    if select:
        chosen = [r for r in rules if any(selector_matches(r, s) for s in select)]
        # a prefix or ALL selects opt-in rules only when it names them exactly
        chosen = [r for r in chosen if r.default or any(s.upper() == r.code or s.lower() == r.name
                                                        or s.lower() in r.families for s in select)]
        # a selected fix that needs `import torch_npu` brings the rule that adds it (`--select
        # NPU101` must not write `.npu()` without what makes `.npu()` exist); `ignore` removes it
        if any(r.needs_torch_npu for r in chosen):
            chosen += [r for r in rules if r.adds_torch_npu_import and r not in chosen]
    else:
        chosen = [r for r in rules if r.default]
    chosen += [r for r in rules if any(selector_matches(r, s) for s in enable) and r not in chosen]
    return [r for r in chosen if not any(selector_matches(r, s) for s in ignore)]


def switched_off_option(rules: Iterable[Selectable], ignore: Iterable[str]) -> dict[str, list[str]]:
    """The `SWITCHED_OFF` rule option of a run whose `ignore` selectors are `ignore`. Empty when
    they match nothing, so the options, and with them the cache key, of a run without `ignore`
    do not change."""
    ignore = list(ignore)
    codes = sorted({r.code for r in rules if any(selector_matches(r, s) for s in ignore)})
    return {SWITCHED_OFF: codes} if codes else {}

"""Finds rules: the built-ins in `npu_migrate_codemods.rules` and third-party plugins registered
under the `npu_migrate.codemods` entry-point group; selects them by code, prefix or name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from functools import lru_cache

from npu_migrate_codemods.base import Rule

ENTRY_POINT_GROUP = "npu_migrate.codemods"


class RuleError(ValueError):
    """A bad rule selection or a broken plugin."""


def _rules_in(module: object) -> list[type[Rule]]:
    found = []
    for value in vars(module).values():
        if (isinstance(value, type) and issubclass(value, Rule) and value is not Rule
                and value.code and value.__module__ == getattr(module, "__name__", None)):
            found.append(value)
    return found


@lru_cache(maxsize=1)
def builtin_rules() -> tuple[type[Rule], ...]:
    from npu_migrate_codemods import rules as package

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        found += _rules_in(importlib.import_module(f"{package.__name__}.{info.name}"))
    return tuple(sorted(found, key=lambda r: r.code))


@lru_cache(maxsize=1)
def plugin_rules() -> tuple[type[Rule], ...]:
    """Rules from installed plugins. An entry point names a module or a Rule class."""
    from importlib.metadata import entry_points

    found: list[type[Rule]] = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = entry.load()
        except Exception as exc:  # a broken plugin must say which one it is
            raise RuleError(f"plugin {entry.name!r} ({entry.value}) failed to load: {exc}") from exc
        if isinstance(target, type) and issubclass(target, Rule):
            found.append(target)
        else:
            found += _rules_in(target)
    return tuple(sorted(found, key=lambda r: r.code))


def all_rules(plugins: bool = True) -> tuple[type[Rule], ...]:
    rules = builtin_rules() + (plugin_rules() if plugins else ())
    seen: dict[str, type[Rule]] = {}
    for rule in rules:
        if rule.code in seen and seen[rule.code] is not rule:
            raise RuleError(f"rule code {rule.code} is defined twice: {seen[rule.code].__module__} "
                            f"and {rule.__module__}")
        seen[rule.code] = rule
    return rules


def _matches(rule: type[Rule], selector: str) -> bool:
    selector = selector.strip()
    return (selector.upper() == "ALL" or rule.code.startswith(selector.upper())
            or rule.name == selector.lower())


def select_rules(rules: Iterable[type[Rule]], select: Iterable[str] = (), ignore: Iterable[str] = (),
                 enable: Iterable[str] = ()) -> list[type[Rule]]:
    """Default rules, or exactly `select` when given; plus opt-in `enable`; minus `ignore`.
    Every selector must match some rule (a typo is an error, not a silent no-op)."""
    rules = list(rules)
    select, ignore, enable = list(select), list(ignore), list(enable)
    for selector in select + ignore + enable:
        if not any(_matches(rule, selector) for rule in rules):
            raise RuleError(f"unknown rule code or name: {selector!r} (see `npu-migrate rules`)")
    if select:
        chosen = [r for r in rules if any(_matches(r, s) for s in select)]
        # a prefix or ALL selects opt-in rules only when it names them exactly
        chosen = [r for r in chosen if r.default or any(s.upper() == r.code or s.lower() == r.name
                                                        for s in select)]
    else:
        chosen = [r for r in rules if r.default]
    chosen += [r for r in rules if any(_matches(r, s) for s in enable) and r not in chosen]
    return [r for r in chosen if not any(_matches(r, s) for s in ignore)]


def find_rule(code_or_name: str) -> type[Rule]:
    for rule in all_rules():
        if rule.code == code_or_name.upper() or rule.name == code_or_name.lower():
            return rule
    raise RuleError(f"unknown rule: {code_or_name!r}")

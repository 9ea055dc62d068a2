"""Finds rules: the built-ins in `codemods.rules` and third-party plugins registered
under the `npu_migrate.codemods` entry-point group; selects them by code, prefix or name.

A plugin entry point names a module (every `Rule` subclass defined in it, or the ones its
`__all__` lists), a `Rule` class, or a list/tuple of `Rule` classes. See docs/plugins.md.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache
from typing import Any

from codemods.api.rule import TEXT_LANGUAGES, Fix, Rule
from codemods.api.selectors import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from codemods.api.selectors import RuleError as RuleError
from codemods.api.selectors import select_rules as select_rules
from codemods.api.selectors import selector_matches as selector_matches

# Built-in rules are found by package name, as plugins are by entry point: discovery, not an
# import, so the framework depends on no rule (docs/architecture.md).
BUILTIN_RULES_PACKAGE = "codemods.rules"
# built-in code families; a plugin using them would collide with a future release
RESERVED_PREFIXES = ("NPU", "ANA", "MEM", "VER")
_CODE = re.compile(r"[A-Z][A-Z0-9]*[0-9]")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# rule class -> "distribution version" of the plugin that provided it
_ORIGINS: dict[type[Rule], str] = {}


def _rules_in(module: object) -> list[type[Rule]]:
    listed = getattr(module, "__all__", None)
    if listed is not None:  # a package re-exporting rules from its submodules
        values = [getattr(module, name, None) for name in listed]
        return [v for v in values if isinstance(v, type) and issubclass(v, Rule) and v.code]
    found = []
    for value in vars(module).values():
        if (isinstance(value, type) and issubclass(value, Rule) and value is not Rule
                and value.code and value.__module__ == getattr(module, "__name__", None)):
            found.append(value)
    return found


@lru_cache(maxsize=1)
def builtin_rules() -> tuple[type[Rule], ...]:
    package = importlib.import_module(BUILTIN_RULES_PACKAGE)
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found += [r for r in _rules_in(module) if r not in found]  # `__all__` may re-export
    return tuple(sorted(found, key=lambda r: r.code))


def _targets(loaded: Any) -> list[type[Rule]] | None:
    if isinstance(loaded, type):
        return [loaded] if issubclass(loaded, Rule) else None
    if isinstance(loaded, (list, tuple)):
        return list(loaded) if all(isinstance(v, type) and issubclass(v, Rule) for v in loaded) else None
    if hasattr(loaded, "__dict__") and hasattr(loaded, "__name__"):  # a module
        return _rules_in(loaded)
    return None


@lru_cache(maxsize=1)
def plugin_rules() -> tuple[type[Rule], ...]:
    """Rules from installed plugins. A plugin that fails to load, or breaks the rule contract,
    is an error naming the plugin: silently running without it would give a different result."""
    from importlib.metadata import entry_points

    found: list[type[Rule]] = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else entry.value
        where = f"plugin {entry.name!r} ({entry.value}, from {origin})"
        try:
            loaded = entry.load()
        except Exception as exc:
            raise RuleError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
        targets = _targets(loaded)
        if targets is None:
            raise RuleError(f"{where} is neither a Rule subclass, a list of them, nor a module")
        for rule in targets:
            _check_plugin_rule(rule, where)
            _ORIGINS[rule] = origin
        found += [r for r in targets if r not in found]
    return tuple(sorted(found, key=lambda r: r.code))


def _check_plugin_rule(rule: type[Rule], where: str) -> None:
    label = f"{where}: rule {rule.__qualname__}"
    if not _CODE.fullmatch(rule.code or ""):
        raise RuleError(f"{label}: code {rule.code!r} must look like ABC123 (capitals, then digits)")
    if rule.code.startswith(RESERVED_PREFIXES):
        raise RuleError(f"{label}: code {rule.code} uses a prefix reserved for built-in rules "
                        f"({', '.join(RESERVED_PREFIXES)})")
    if not _NAME.fullmatch(rule.name or ""):
        raise RuleError(f"{label}: name {rule.name!r} must be kebab-case")
    if not isinstance(rule.fix, Fix):
        raise RuleError(f"{label}: fix must be a Fix member, not {rule.fix!r}")
    languages = ("python", *TEXT_LANGUAGES)
    if rule.language not in languages:
        raise RuleError(f"{label}: language must be one of {', '.join(languages)}, not {rule.language!r}")
    try:
        re.compile(rule.prefilter)
    except re.error as exc:
        raise RuleError(f"{label}: prefilter is not a valid regex: {exc}") from None


def plugin_origin(rule: type[Rule]) -> str | None:
    """'distribution version' of the plugin that provided `rule`; None for built-ins."""
    if rule not in _ORIGINS and rule not in builtin_rules():
        plugin_rules()
    return _ORIGINS.get(rule)


def all_rules(plugins: bool = True) -> tuple[type[Rule], ...]:
    rules = builtin_rules() + (plugin_rules() if plugins else ())
    codes: dict[str, type[Rule]] = {}
    names: dict[str, type[Rule]] = {}
    for rule in rules:
        for key, seen, what in ((rule.code, codes, "code"), (rule.name, names, "name")):
            if key in seen and seen[key] is not rule:
                raise RuleError(f"rule {what} {key} is defined twice: {_label(seen[key])} "
                                f"and {_label(rule)}")
            seen[key] = rule
    return rules


def _label(rule: type[Rule]) -> str:
    origin = _ORIGINS.get(rule)
    return f"{rule.__module__}" + (f" (plugin {origin})" if origin else "")


def find_rule(code_or_name: str) -> type[Rule]:
    for rule in all_rules():
        if rule.code == code_or_name.upper() or rule.name == code_or_name.lower():
            return rule
    raise RuleError(f"unknown rule: {code_or_name!r} (see `npu-migrate rules`)")

"""What a run needs to know about the rules before it migrates anything, without importing them:
each rule's code, name, default, the files it reads and the project facts it declares.

Built by importing every rule (built-in and plugin) once, then kept in the cache folder under a
key of the tool's sources and the installed plugins (`rules-<key>.json`): a run whose files are
all served from the cache then never imports a rule module, nor LibCST. Without a cache folder
(`--no-cache`) the rules are imported, as before.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from codemods.api.facts import ProjectFact
from npu_migrate.apply.cache import (
    FORMAT,
    _checked_entry,
    _checksum,
    _write_atomic,
    plugin_fingerprint,
    prepare_folder,
    tool_fingerprint,
)
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX


@dataclass(frozen=True)
class RuleInfo:
    """One rule as the run's planning sees it (what `codemods.api.selectors` selects over)."""

    code: str
    name: str
    default: bool
    suffixes: tuple[str, ...]  # the files it reads
    facts: tuple[str, ...]  # its project facts, as "module:attribute" (importable without LibCST)
    supported_targets: frozenset[str]  # as `Rule` has them (`codemods.api.targets.plan_rules`)
    replaces: tuple[str, ...]
    families: tuple[str, ...] = ()  # what `--enable tune` names
    needs_torch_npu: bool = False
    adds_torch_npu_import: bool = False


_BUILT: dict[str, tuple[RuleInfo, ...]] = {}  # per process, by catalogue key


def rule_catalogue(cache_dir: str | None) -> tuple[RuleInfo, ...]:
    """The installed rules, read from `cache_dir` when a run stored them there before."""
    key = _catalogue_key()
    if key in _BUILT:
        return _BUILT[key]
    stored = os.path.join(cache_dir, f"rules-{key[:16]}.json") if cache_dir else None
    rules = _read(stored) if stored else None
    if rules is None:
        rules = _from_rules()
        if stored:
            _write(stored, rules)
    _BUILT[key] = rules
    return rules


def project_facts(rules: tuple[RuleInfo, ...] | list[RuleInfo]) -> tuple[ProjectFact, ...]:
    """The project facts `rules` declare, each once, in the order they declare them."""
    found: dict[str, ProjectFact] = {}
    for rule in rules:
        for reference in rule.facts:
            fact = _load_fact(reference)
            found.setdefault(fact.key, fact)
    return tuple(found.values())


def _catalogue_key() -> str:
    material = json.dumps([FORMAT, tool_fingerprint(), plugin_fingerprint()])
    return hashlib.sha256(material.encode()).hexdigest()


def _from_rules() -> tuple[RuleInfo, ...]:
    from codemods.api.registry import all_rules
    from codemods.api.rule import TEXT_LANGUAGES

    infos = []
    for rule in all_rules():
        suffixes = TEXT_LANGUAGES.get(rule.language, (".py", NOTEBOOK_SUFFIX))
        infos.append(RuleInfo(rule.code, rule.name, rule.default, tuple(suffixes),
                              tuple(_reference(rule, i, fact) for i, fact in enumerate(rule.project_facts)),
                              frozenset(rule.supported_targets), tuple(rule.replaces), tuple(rule.families),
                              rule.needs_torch_npu, rule.adds_torch_npu_import))
    return tuple(infos)


def _reference(rule: Any, position: int, fact: ProjectFact) -> str:
    """Where to find a fact again: the module attribute holding it, else through its rule."""
    module = sys.modules.get(type(fact).__module__)
    name = next((n for n, v in vars(module).items() if v is fact), None) if module is not None else None
    return f"{type(fact).__module__}:{name}" if name else f"rule:{rule.code}:{position}"


def _load_fact(reference: str) -> ProjectFact:
    module, _, name = reference.partition(":")
    if module == "rule":  # a fact made inside a rule's class body: import the rules
        from codemods.api.registry import all_rules

        code, _, position = name.partition(":")
        rule = next(r for r in all_rules() if r.code == code)
        return rule.project_facts[int(position)]
    fact = getattr(importlib.import_module(module), name)
    assert isinstance(fact, ProjectFact), reference
    return fact


def _read(path: str) -> tuple[RuleInfo, ...] | None:
    try:
        with open(path, "rb") as handle:
            entry = _checked_entry(handle.read())
        return tuple(RuleInfo(str(e["code"]), str(e["name"]), bool(e["default"]), tuple(e["suffixes"]),
                              tuple(e["facts"]), frozenset(e["targets"]), tuple(e["replaces"]),
                              tuple(e["families"]), bool(e["needs_torch_npu"]), bool(e["adds_torch_npu_import"]))
                     for e in entry["rules"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: str, rules: tuple[RuleInfo, ...]) -> None:
    entry: dict[str, Any] = {"rules": [{"code": r.code, "name": r.name, "default": r.default,
                                        "suffixes": list(r.suffixes), "facts": list(r.facts),
                                        "targets": sorted(r.supported_targets), "replaces": list(r.replaces),
                                        "families": list(r.families), "needs_torch_npu": r.needs_torch_npu,
                                        "adds_torch_npu_import": r.adds_torch_npu_import}
                                       for r in rules]}
    entry["checksum"] = _checksum(entry)
    try:
        prepare_folder(os.path.dirname(path))
        _write_atomic(path, json.dumps(entry, sort_keys=True).encode("utf-8"))
    except OSError:
        pass  # a cache that cannot be written only costs time

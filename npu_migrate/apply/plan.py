"""Settings → plans: for each configuration, the rules it selects (checked against the installed
rules, read from the rule catalogue so that a run served from its cache imports none), their
options, the files they read and the project facts they declare."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from codemods.api.selectors import RuleError, select_rules, switched_off_option
from codemods.api.targets import plan_rules, target_of
from npu_migrate.apply.cache import DEFAULT_DIR
from npu_migrate.apply.catalogue import RuleInfo, project_facts, rule_catalogue
from npu_migrate.apply.runner import RunPlan
from npu_migrate.apply.selection import resolve_rule_selectors
from npu_migrate.core.config import Settings, did_you_mean, parse_table


def split_selectors(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def cache_dir_for(settings: Settings, cache_dir: str | None, no_cache: bool) -> str | None:
    """Where a configuration's results are cached: `--cache-dir`, its `cache-dir`, or
    `.npu-migrate-cache` beside it (here without one); None under `--no-cache`."""
    if no_cache:
        return None
    return cache_dir or settings.cache_dir or os.path.join(settings.root if settings.source else ".", DEFAULT_DIR)


def plan_for(settings: Settings, select: Sequence[str], ignore: Sequence[str], enable: Sequence[str],
             rules: Sequence[RuleInfo] | None = None) -> RunPlan:
    """The plan of one configuration, with the command line's selectors on top. `rules`: the
    installed rules (default: the catalogue, built by importing them)."""
    rules = tuple(rules if rules is not None else rule_catalogue(None))
    ignored = split_selectors(ignore) + settings.ignore
    try:
        chosen = select_rules(rules, split_selectors(select) or settings.select, ignored,
                              split_selectors(enable) + settings.enable)
    except RuleError as exc:
        unknown = str(exc).split("'")[1] if str(exc).count("'") >= 2 else ""
        close = did_you_mean(unknown, [r.code for r in rules] + [r.name for r in rules]) if unknown else None
        raise RuleError(f"{exc}; did you mean {close!r}?" if close else str(exc)) from None
    options = settings.rule_options() | switched_off_option(rules, ignored)
    running, reporting = plan_rules(chosen, target_of(options), rules)
    present = running + reporting  # what the engine's rule set holds for this target
    return RunPlan([r.code for r in chosen], options, settings.per_file_ignores, settings.root,
                   file_suffixes=tuple(dict.fromkeys(s for r in present for s in r.suffixes)),
                   project_facts=project_facts(present))


class Planner:
    """One plan per distinct settings (the finder returns one object per configuration file); the
    configuration's rule selectors are checked against the installed rules here, once.
    `overrides` are command-line values of configuration keys (`--target`), checked as the
    configuration's own values are."""

    def __init__(self, select: Sequence[str], ignore: Sequence[str], enable: Sequence[str],
                 overrides: dict[str, str], cache_dir: str | None, no_cache: bool) -> None:
        self.select, self.ignore, self.enable = select, ignore, enable
        self.overrides = overrides
        self.cache_dir, self.no_cache = cache_dir, no_cache
        self._plans: dict[int, tuple[RunPlan, Settings]] = {}
        self._rules: dict[str | None, tuple[RuleInfo, ...]] = {}  # per cache folder

    def __call__(self, settings: Settings) -> RunPlan:
        if id(settings) not in self._plans:
            chosen = settings
            if self.overrides:
                given = parse_table(self.overrides, "command line")
                chosen = dataclasses.replace(settings, **{key.replace("-", "_"): getattr(given, key.replace("-", "_"))
                                                          for key in self.overrides})
            directory = cache_dir_for(settings, self.cache_dir, self.no_cache)
            if directory not in self._rules:
                self._rules[directory] = rule_catalogue(directory)
            rules = self._rules[directory]
            plan = plan_for(resolve_rule_selectors(chosen, rules), self.select, self.ignore, self.enable, rules)
            self._plans[id(settings)] = (plan, settings)
        return self._plans[id(settings)][0]

    def settings_of(self, plan: RunPlan) -> Settings:
        return next(settings for known, settings in self._plans.values() if known is plan)

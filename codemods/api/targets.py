"""What code a run writes: `npu` (torch_npu code) or `portable` (device-generic code that runs on
CUDA, Ascend and CPU alike), and the oldest torch it must run on (`target-version`).

Rules read both from their context (`target_of(options)`, `version_allows(options, api)`); the
engine asks `plan_rules` which rules run normally and which only report under the target:

- a rule states the targets it writes code for in `Rule.supported_targets` (default: npu only);
- a portable rule may name the npu rules it stands in for (`Rule.replaces`): under `portable`
  it runs in their place, under `npu` it does not run;
- under `portable`, an npu-only rule with no stand-in runs *report-only*: its rewrites are
  dropped and each becomes a warning (`report_instead`), so `--target portable` never writes
  torch_npu code silently.

The API table (`codemods/data/api_versions.json`) says from which torch release each API the
rules emit exists; below the configured minimum a rule emits the older spelling or reports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from codemods.data.tables import load_data
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity

NPU, PORTABLE = "npu", "portable"


class Targeted(Protocol):
    """A rule, or the run's catalogue entry for one, as far as targets go."""

    @property
    def code(self) -> str: ...

    @property
    def supported_targets(self) -> frozenset[str]: ...

    @property
    def replaces(self) -> tuple[str, ...]: ...


R = TypeVar("R", bound=Targeted)
TARGETS = (NPU, PORTABLE)


def target_of(options: Mapping[str, Any]) -> str:
    return options.get("target") or NPU


def parse_version(text: str) -> tuple[int, int]:
    """'2.6.0rc1' -> (2, 6): the API table is kept per torch minor release."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if not match:
        raise ValueError(f"not a torch version: {text!r}")
    return int(match.group(1)), int(match.group(2))


@functools.cache
def api_table() -> dict[str, dict[str, Any]]:
    apis: dict[str, dict[str, Any]] = load_data("api_versions.json")["apis"]
    return apis


def since(api: str) -> tuple[int, int]:
    return parse_version(api_table()[api]["since"])


def version_allows(options: Mapping[str, Any], api: str) -> bool:
    """Whether `api` exists in every torch the code must run on (no minimum: the newest)."""
    minimum = options.get("target_version")
    return minimum is None or parse_version(minimum) >= since(api)


def too_old(options: Mapping[str, Any], api: str) -> str:
    """The explanation for a report when the minimum version rules an API out."""
    return (f"`{api}` needs torch {api_table()[api]['since']}, older than target-version "
            f"{options.get('target_version')}")


@functools.cache
def _npu_rows() -> dict[str, str]:
    """torch_npu name -> its row of the API table (rows with `names`)."""
    return {name: api for api, row in api_table().items() for name in row.get("names", ())}


def npu_too_new(options: Mapping[str, Any], npu_name: str) -> str | None:
    """Why the npu target may not write `npu_name` for the configured target-version (the
    oldest torch_npu pins that torch), or None when it may."""
    api = _npu_rows().get(npu_name)
    if api is None or version_allows(options, api):
        return None
    return (f"`{npu_name}` is not in torch_npu {options.get('target_version')} (it needs "
            f"{api_table()[api]['since']}, codemods/data/api_versions.json): kept; use it once "
            "target-version allows, or drop it")


def plan_rules(rules: Sequence[R], target: str, catalogue: Sequence[R] = ()) -> tuple[list[R], list[R]]:
    """(rules that run, rules that only report) for `target`, in the given order. Under
    `portable` a selected npu rule that a portable rule of `catalogue` (every installed rule)
    replaces brings that rule in instead."""
    if target == NPU:
        return [r for r in rules if NPU in r.supported_targets], []
    stand_in = {code: rule for rule in catalogue if PORTABLE in rule.supported_targets for code in rule.replaces}
    running: list[R] = []
    reporting: list[R] = []
    for rule in rules:
        chosen = rule if PORTABLE in rule.supported_targets else stand_in.get(rule.code)
        if chosen is None:
            reporting.append(rule)
        elif chosen not in running:
            running.append(chosen)
    return running, reporting


def report_instead(edit: Edit, path: str, rule: Any = None) -> Diagnostic:
    """An npu rewrite that `--target portable` does not make, at the same place: a warning, or,
    for a rule that states why its CUDA code may stay in portable code (`Rule.portable_keeps`:
    the code is harmless on other devices, or no device-generic form exists by design), an
    info line with that reason."""
    keeps = getattr(rule, "portable_keeps", None)
    if keeps:
        return Diagnostic(edit.code, f"kept under --target portable: {keeps} (the npu target would: "
                          f"{edit.message})", path, edit.line, edit.col, Severity.INFO)
    return Diagnostic(edit.code, f"left as is under --target portable (the npu target would: "
                      f"{edit.message}); no device-generic rewrite for this yet: make it generic "
                      "by hand or keep it", path, edit.line, edit.col, Severity.WARNING)

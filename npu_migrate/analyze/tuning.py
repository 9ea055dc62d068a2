"""Tuning opportunities (issue 27): what the opt-in `tune` rules (NPU410, NPU600-NPU629) would change
in a file, or why they would not, as located findings with evidence, the expected effect and the
rule that applies it. The engine runs the family on the file (one more prefiltered pass), so a
finding never claims what `apply --enable tune` would not do."""

from __future__ import annotations

import ast
import functools

from codemods.families.tune import FAMILY, data, opportunity
from npu_migrate.analyze.findings import Finding, finding, seen
from npu_migrate.apply.engine import RuleSet, migrate_text

SECTION_CODE = {"computation": "ANA034", "memory": "ANA049"}


@functools.cache
def _ruleset() -> RuleSet:
    from codemods.api.registry import all_rules

    return RuleSet([r for r in all_rules() if FAMILY in r.families])


@functools.cache
def _names() -> dict[str, str]:
    return {rule.code: rule.name for rule in _ruleset().rules}


def tuning_findings(path: str, text: str, tree: ast.Module | None = None) -> list[Finding]:
    outcome = migrate_text(text, path, _ruleset(), tree=tree)
    if outcome.error:
        return []
    lines = text.splitlines()
    found = []
    opportunities = data()["opportunities"]
    for record, applied in [(e, True) for e in outcome.edits] + [(d, False) for d in outcome.diagnostics]:
        if record.code not in opportunities:
            continue
        what = opportunity(record.code)
        name = _names()[record.code]
        if applied:
            message = (f"{what['kind']}: {record.message}. Expected: {what['effect']} "
                       f"(`npu-migrate apply --enable {name}`, {record.code})")
        else:
            message = f"{what['kind']} ({record.code} {name}) not applied here: {record.message}"
        evidence = [seen(what["kind"], lines, record.line),
                    f"rule {record.code} ({name}) " + ("rewrites this line" if applied else "reports this line")]
        found.append(finding(SECTION_CODE[what["section"]], path, (record.line, record.col), message,
                             evidence=evidence, confidence="high" if applied else "medium"))
    return found


def apex_routes() -> str:
    """Which apex route fits which torch_npu release (codemods/data/tune.json)."""
    return "; ".join(f"torch_npu {r['torch_npu']}: {r['route']}" for r in data()["apex_routes"])

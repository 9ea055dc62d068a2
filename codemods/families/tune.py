"""NPU600-NPU629, the opt-in `tune` family: Ascend-specific tuning (fused optimizers, compile
mode, static shapes, fused operators, the launch environment), enabled together with
`apply --enable tune` or one by one by code or name (docs/tune.md).

Every rewrite is gated by the configured torch_npu release (`target-version`; torch_npu X.Y pins
torch X.Y): below the release that has the API the rule writes, it keeps the code and says why
(`TuneRule.version_blocks`). The facts come from `codemods/data/tune.json` and the version rows
of `codemods/data/api_versions.json`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import libcst as cst

from codemods.analyses.tunefacts import TuneFacts, tune_data, tune_facts
from codemods.api.rule import Fix, Rule
from codemods.api.targets import api_table, version_allows
from npu_migrate.core.diagnostics import Severity

FAMILY = "tune"


class TuneRule(Rule):
    """Base of the tune rules: opt-in, in the `tune` family, gated by `api` (a row of
    api_versions.json)."""

    default = False
    families = (FAMILY,)
    fix = Fix.UNSAFE
    severity = Severity.INFO
    api: ClassVar[str] = ""

    @property
    def facts(self) -> TuneFacts:
        return self.context.model.derived(tune_facts)

    def version_blocks(self, node: cst.CSTNode, what: str, api: str | None = None) -> bool:
        """True (and a report at `node`) when target-version is older than the torch_npu release
        that has `api` (default: the rule's own)."""
        api = api or self.api
        if version_allows(self.context.options, api):
            return False
        self.report(node, f"{what}: not applied, `{api}` needs torch_npu {api_table()[api]['since']} "
                          f"and target-version is {self.context.options.get('target_version')} "
                          "(codemods/data/api_versions.json)")
        return True


def data() -> dict[str, Any]:
    return tune_data()


def opportunity(code: str) -> dict[str, str]:
    """What analyze says about a rule's change: kind, section, expected effect."""
    found: dict[str, str] = tune_data()["opportunities"][code]
    return found

"""What issue 27 asks of every tune rule: cases that rewrite (before/after) and cases left
untouched, a generated page, and a version gate tested at both sides of its boundary -- here each
launch variable at its own torch_npu release (NPU620 in launch scripts, NPU621 in Python), each
fused optimizer NPU600 maps, and every gated rule covered by test_tune_rules.GATED.

The boundaries come from the data (codemods/data/tune.json and api_versions.json), so a row
moved to another release moves the test with it."""

from __future__ import annotations

import pytest

from codemods.analyses.tunefacts import tune_data
from codemods.api.cases import Invalid, Valid, cases_of
from codemods.api.registry import all_rules
from codemods.docgen.pages import render_rule_page
from npu_migrate.commands.docgen import DOCS
from codemods.api.targets import api_table
from tests.rules.rule_cases import migrate
from tests.tune.test_tune_rules import GATED, _below

TUNE_RULES = [rule for rule in all_rules() if "tune" in rule.families]
LAUNCH = tune_data()["launch_env"]
OPTIMIZERS = tune_data()["optimizers"]

SHELL_SCRIPT = "#!/bin/bash\ntorchrun --nproc_per_node=2 train.py\n"
PYTHON_SCRIPT = "import torch\nif __name__ == '__main__':\n    for x in loader:\n        model(x).sum().backward()\n"
SCRIPTS = {"NPU620": (SHELL_SCRIPT, "train.sh"), "NPU621": (PYTHON_SCRIPT, "train.py")}


def _launch_settings(code: str, version: str) -> tuple[str, list[str]]:
    """The text rule `code` makes of its script at target-version `version` (the script itself
    when it changes nothing) and its diagnostics' messages."""
    source, path = SCRIPTS[code]
    outcome = migrate(source, [code], path, options={"target_version": version})
    return outcome.new_text or source, [d.message for d in outcome.diagnostics if d.code == code]


@pytest.mark.parametrize("code", sorted(SCRIPTS))
@pytest.mark.parametrize("entry", LAUNCH, ids=[e["name"] for e in LAUNCH])
def test_each_launch_variable_is_gated_at_its_own_release(code: str, entry: dict[str, str]) -> None:
    since = api_table()[entry["api"]]["since"]
    setting = f"{entry['name']}={entry['value']}" if code == "NPU620" else f'"{entry["name"]}", "{entry["value"]}"'

    text, messages = _launch_settings(code, since)
    assert setting in text, f"{code} must set {entry['name']} at target-version {since}"
    assert not any(entry["name"] in m and "needs torch_npu" in m for m in messages)

    below = _below(since)
    text, messages = _launch_settings(code, below)
    assert entry["name"] not in text, f"{code} must not set {entry['name']} at target-version {below}"
    assert any(f"`{entry['name']}={entry['value']}`" in m and f"needs torch_npu {since}" in m for m in messages)


@pytest.mark.parametrize("torch_name", sorted(OPTIMIZERS))
def test_each_fused_optimizer_is_gated_at_the_release_that_has_it(torch_name: str) -> None:
    spec = OPTIMIZERS[torch_name]
    call = f"{torch_name}(model.parameters(), lr=0.1)"
    source = f"import torch\noptimizer = {call}\nfor x in loader:\n    model(x).sum().backward()\n    optimizer.step()\n"
    since = api_table()["torch_npu.optim fused optimizers"]["since"]

    tuned = migrate(source, ["NPU600"], options={"target_version": since}).new_text
    assert tuned is not None and f"{spec['npu']}(model.parameters(), lr=0.1)" in tuned

    below = _below(since)
    kept = migrate(source, ["NPU600"], options={"target_version": below})
    assert kept.new_text is None
    assert any(d.code == "NPU600" and spec["npu"] in d.message and f"target-version is {below}" in d.message
               for d in kept.diagnostics)


def test_every_gated_tune_rule_has_its_boundary_tested() -> None:
    gated = {rule.code for rule in all_rules() if "tune" in rule.families and getattr(rule, "api", "")}
    assert gated == {code for code, *_ in GATED}
    for code, api, *_ in GATED:
        rule = next(r for r in all_rules() if r.code == code)
        assert api == rule.api, f"{code} is gated by {rule.api!r}, the test checks {api!r}"


@pytest.mark.parametrize("rule", TUNE_RULES, ids=[r.code for r in TUNE_RULES])
def test_every_tune_rule_has_before_after_and_untouched_cases_and_its_page(rule) -> None:
    cases = cases_of(rule)
    assert any(isinstance(c, Invalid) and c.after is not None for c in cases), "no before/after case"
    assert any(isinstance(c, Valid) for c in cases), "no case the rule leaves untouched"
    page = DOCS / "rules" / f"{rule.code}.md"
    assert page.is_file() and page.read_text(encoding="utf-8") == render_rule_page(rule)

"""docs/targets.md's before/after example is what `apply --target portable` makes of it, and both
blocks run on plain CPU torch with the same output: the page cannot drift from the tool."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

PAGE = Path(__file__).resolve().parents[2] / "docs" / "targets.md"


def _blocks() -> tuple[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    before = re.search(r"### Before\n\n```python\n(.*?)```", text, re.S)
    after = re.search(r"### After[^\n]*\n\n```python\n(.*?)```", text, re.S)
    assert before and after
    return before.group(1), after.group(1)


def test_the_page_example_is_what_apply_writes() -> None:
    before, after = _blocks()
    outcome = migrate_text(before, "example.py", RuleSet(select_rules(all_rules(), select=[]),
                                                         {"target": "portable"}))
    assert outcome.error is None and outcome.diagnostics == []
    assert outcome.new_text == after


def test_both_blocks_run_on_cpu_torch_alike(tmp_path) -> None:
    outputs = []
    for index, block in enumerate(_blocks()):
        script = tmp_path / f"block{index}.py"
        script.write_text(block, encoding="utf-8")
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]

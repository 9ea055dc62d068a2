"""`target-version` under both targets, for the rows of codemods/data/api_versions.json that
tests/portable/test_targets.py does not cover: each row changes the output exactly at its
boundary (the row's `since`), and not one release earlier or later."""

from __future__ import annotations

import pytest

from codemods.api.registry import all_rules, select_rules
from codemods.data.tables import load_data
from npu_migrate.apply.engine import RuleSet, migrate_text


def migrate(src: str, target: str, version: str | None):
    rules = select_rules(all_rules(), select=[])
    outcome = migrate_text(src, "t.py", RuleSet(rules, {"target": target, "target_version": version}))
    assert outcome.error is None, outcome.error
    return (outcome.new_text or src), [d.code for d in outcome.diagnostics]


def before(since: str) -> str:
    major, minor = since.split(".")
    return f"{major}.{int(minor) - 1}"


ROWS = load_data("api_versions.json")["apis"]


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_out_of_memory_error_row(target: str) -> None:
    src = "import torch\ntry:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    pass\n"
    since = ROWS["torch.OutOfMemoryError"]["since"]
    text, _ = migrate(src, target, since)
    assert "except torch.OutOfMemoryError:" in text
    text, codes = migrate(src, target, before(since))
    assert "except torch.cuda.OutOfMemoryError:" in text and "NPU503" in codes


@pytest.mark.parametrize("name", ROWS["torch_npu host memory statistics"]["names"])
def test_host_memory_stats_row(name: str) -> None:
    cuda = name.replace("torch.npu.", "torch.cuda.")
    src = f"import torch\nprint({cuda}())\n"
    since = ROWS["torch_npu host memory statistics"]["since"]
    text, _ = migrate(src, "npu", since)
    assert f"print({name}())" in text
    text, codes = migrate(src, "npu", before(since))
    assert text == src and codes == ["NPU155"]
    assert migrate(src, "npu", None)[0] != src  # no minimum: the newest torch_npu


def test_per_process_memory_fraction_row() -> None:
    src = "import torch\nprint(torch.cuda.memory.get_per_process_memory_fraction())\n"
    since = ROWS["torch_npu get_per_process_memory_fraction"]["since"]
    assert "torch.npu.memory.get_per_process_memory_fraction()" in migrate(src, "npu", since)[0]
    text, codes = migrate(src, "npu", before(since))
    assert text == src and codes == ["NPU155"]


def test_an_import_by_name_is_kept_below_the_row() -> None:
    src = "import torch\nfrom torch.cuda.memory import host_memory_stats\nprint(host_memory_stats())\n"
    text, codes = migrate(src, "npu", "2.6")
    assert text == src and "NPU155" in codes
    assert "from torch_npu.npu.memory import host_memory_stats" in migrate(src, "npu", "2.9")[0]


MSTX = {"torch_npu.npu.mstx.range_push": 'torch.cuda.nvtx.range_push("a")\n',
        "torch_npu.npu.mstx.range_pop": "torch.cuda.nvtx.range_pop()\n",
        "torch_npu.npu.mstx.annotate": 'with torch.cuda.nvtx.range("step"):\n    pass\n'}


@pytest.mark.parametrize("name", ROWS["torch_npu mstx ranges"]["names"])
def test_mstx_ranges_row(name: str) -> None:
    """docs/targets.md says the npu target honours target-version: `mstx.annotate` & co. exist only
    in the torch_npu 26.x releases, and `--target-version 2.1` wrote them all the same (issue 29)."""
    src = "import torch\nimport torch_npu\n" + MSTX[name]
    since = ROWS["torch_npu mstx ranges"]["since"]
    assert name in migrate(src, "npu", since)[0]
    text, codes = migrate(src, "npu", before(since))
    assert text == src and codes == ["NPU170"]
    assert name not in migrate(src, "npu", "2.1")[0]

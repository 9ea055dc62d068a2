"""`target` and `target-version`: each row of codemods/data/api_versions.json changes the output
exactly at its boundary, npu rules never write torch_npu code under --target portable, and the
plumbing (config key, command-line option, cache key) carries the target to the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemods.api.registry import all_rules, select_rules
from codemods.api.targets import plan_rules, version_allows
from codemods.data.tables import load_data
from npu_migrate.apply.cache import run_key
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.core.config import Settings

REPO = Path(__file__).resolve().parents[2]


def portable(src: str, version: str | None = None):
    rules = select_rules(all_rules(), select=[])
    outcome = migrate_text(src, "t.py", RuleSet(rules, {"target": "portable", "target_version": version}))
    assert outcome.error is None, outcome.error
    return outcome


def text_of(src: str, version: str | None = None) -> str:
    outcome = portable(src, version)
    return outcome.new_text if outcome.new_text is not None else src


def reported(src: str, version: str | None = None) -> list[str]:
    return [d.code for d in portable(src, version).diagnostics]


SYNC = "import torch\ntorch.cuda.synchronize()\n"
MEMORY = "import torch\nprint(torch.cuda.memory_allocated())\n"
NCCL = "import torch.distributed as dist\ndist.init_process_group('nccl')\n"


def test_torch_accelerator_row() -> None:
    assert "torch.accelerator.synchronize()" in text_of(SYNC, "2.6")
    assert "torch.get_device_module().synchronize()" in text_of(SYNC, "2.5")
    assert ".to(DEVICE)" in text_of("import torch\nx = y.cuda()\n", "2.6")
    assert reported("import torch\nx = y.cuda()\n", "2.5") == ["NPU101"]


def test_torch_accelerator_memory_row() -> None:
    assert "torch.accelerator.memory_allocated()" in text_of(MEMORY, "2.9")
    assert "torch.get_device_module().memory_allocated()" in text_of(MEMORY, "2.8")


def test_get_device_module_row() -> None:
    assert "torch.get_device_module().synchronize()" in text_of(SYNC, "2.3")
    assert text_of(SYNC, "2.2") == SYNC and reported(SYNC, "2.2") == ["NPU120"]


def test_default_backend_row() -> None:
    assert "get_default_backend_for_device(DEVICE)" in text_of(NCCL, "2.6")
    assert text_of(NCCL, "2.5") == NCCL and reported(NCCL, "2.5") == ["NPU140"]


def test_autoload_row() -> None:
    assert "import torch_npu  # noqa: F401  (torch < 2.5: no autoload)" in text_of(SYNC, "2.4")
    assert "torch_npu" not in text_of(SYNC, "2.5")
    assert "torch_npu" not in text_of(SYNC)  # no minimum: the newest torch


def test_every_row_is_consulted_by_the_rules() -> None:
    """A torch row is named by a rule or by the routes the rules read (routes.json: the torch class
    a constructor route writes, checked against target-version); a torch_npu row (`names`) lists
    names the npu target writes (an `npu` value of a data table), which codemods/families/namemap.py checks."""
    sources = "".join(p.read_text(encoding="utf-8") for p in (REPO / "codemods").rglob("*.py"))
    sources += (REPO / "codemods" / "data" / "routes.json").read_text(encoding="utf-8")
    tables = "".join(p.read_text(encoding="utf-8") for p in (REPO / "codemods" / "data").glob("coverage_*.json"))
    for api, row in load_data("api_versions.json")["apis"].items():
        if "names" in row:
            assert all(f'"npu": "{name}"' in tables for name in row["names"]), f"{api}: a name no rule writes"
        else:
            assert f'"{api}"' in sources, f"{api}: a row no rule reads"


def test_no_minimum_allows_everything() -> None:
    assert all(version_allows({}, api) for api in load_data("api_versions.json")["apis"])


def test_npu_rules_only_report_under_portable() -> None:
    src = "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\nx = torch.cuda.FloatTensor(2)\n"
    npu = migrate_text(src, "t.py", RuleSet(select_rules(all_rules(), select=[]), {}))
    assert npu.new_text is not None and "torch_npu" in npu.new_text
    outcome = portable(src)
    assert outcome.new_text is None
    assert outcome.diagnostics and all("--target portable" in d.message for d in outcome.diagnostics)


def test_plan_rules_under_each_target() -> None:
    rules = select_rules(all_rules(), select=[])
    running, reporting = plan_rules(rules, "npu", all_rules())
    assert reporting == [] and running == [r for r in rules if "npu" in r.supported_targets]
    running, reporting = plan_rules(rules, "portable", all_rules())
    assert {r.code for r in running} >= {"NPU101", "NPU103", "NPU104", "NPU120", "NPU130", "NPU140"}
    assert all("portable" not in r.supported_targets for r in reporting)


def test_target_is_part_of_the_cache_key() -> None:
    npu, port = Settings().rule_options(), Settings(target="portable").rule_options()
    assert run_key(["NPU101"], npu) != run_key(["NPU101"], port)


@pytest.mark.parametrize("option", ["--target", "--target-version"])
def test_command_line_options(tmp_path, option) -> None:
    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    script = tmp_path / "t.py"
    script.write_text(SYNC, encoding="utf-8")
    args = ["--target", "portable"] + (["--target-version", "2.5"] if option == "--target-version" else [])
    result = CliRunner().invoke(command, [*args, "--no-cache", "--isolated", "--diff", str(script)])
    assert result.exit_code == 1, result.output
    expected = "torch.get_device_module()" if option == "--target-version" else "torch.accelerator.synchronize()"
    assert expected in result.output
    bad = CliRunner().invoke(command, ["--target-version", "latest", "--isolated", str(script)])
    assert bad.exit_code == 2 and "target-version must be a torch version" in bad.output


def test_analyze_judges_by_the_target(tmp_path) -> None:
    """`analyze --target portable` says what apply would do under that target: the TF32 flag
    has no portable rewrite, so it moves from rewritten to reported."""
    import json

    from click.testing import CliRunner

    from npu_migrate.commands.analyze import command

    script = tmp_path / "t.py"
    script.write_text("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\nx = y.cuda()\n",
                      encoding="utf-8")
    reports = {}
    for target in ("npu", "portable"):
        result = CliRunner().invoke(command, [str(script), "--isolated", "--format", "json", "--target", target])
        assert result.exit_code == 0, result.output
        reports[target] = json.loads(result.output)["summary"]["CUDA locations"]
    assert "2 rewritten by apply, 0 reported" in reports["npu"]
    assert "1 rewritten by apply, 1 reported" in reports["portable"]


def test_launch_scripts_under_portable_serve_both_clusters() -> None:
    """A launch script keeps CUDA_VISIBLE_DEVICES and gets ASCEND_RT_VISIBLE_DEVICES beside it
    (NPU251); `--backend nccl` has no portable form yet and is a warning; a second run changes
    nothing."""
    src = "export CUDA_VISIBLE_DEVICES=0,1\ntorchrun --nproc_per_node 2 train.py --backend nccl\n"
    rules = select_rules(all_rules(), select=[])
    outcome = migrate_text(src, "run.sh", RuleSet(rules, {"target": "portable"}))
    assert outcome.new_text == ("export ASCEND_RT_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=0,1\n"
                                "torchrun --nproc_per_node 2 train.py --backend nccl\n")
    assert [e.code for e in outcome.edits] == ["NPU251"]
    assert [d.code for d in outcome.diagnostics] == ["NPU256"]
    assert "--target portable" in outcome.diagnostics[0].message
    again = migrate_text(outcome.new_text, "run.sh", RuleSet(rules, {"target": "portable"}))
    assert again.new_text is None and again.edits == []


NPU_SPELLING = re.compile(r"\bnpu\b|\bhccl\b|torch_npu|mstx|\bhf32\b", re.I)
# a choice by device type names every device on purpose (NPU175: `{"cuda": ..., "npu": ...}.get(DEVICE.type, ...)`,
# NPU420: `DEVICE.type in ("cuda", "npu")`, the devices that record a memory history), in the quotes
# the source uses
BY_DEVICE_TYPE = re.compile(r"""\{(["'])cuda\1: \1\w+\1, \1npu\1: \1\w+\1\}\.get\(DEVICE\.type, \1\w+\1\)"""
                            r"""|DEVICE\.type in \((["'])cuda\2, \2npu\2\)""")


def _npu_cases():
    from codemods.api.cases import Invalid, cases_of

    return [pytest.param(rule, case.source, case.path, id=f"{rule.code}-{index}")
            for rule in all_rules() for index, case in enumerate(cases_of(rule))
            if isinstance(case, Invalid) and case.after is not None and not case.options]


@pytest.mark.parametrize(("rule", "source", "path"), _npu_cases())
def test_no_rule_writes_npu_code_under_portable(rule, source, path) -> None:
    """Every npu rewrite the rules' own cases show, run under --target portable (with every
    default rule besides): nothing NPU-specific appears that the source did not already have."""
    rules = select_rules(all_rules(), select=[], enable=[] if rule.default else [rule.code])
    outcome = migrate_text(source, path, RuleSet(rules, {"target": "portable"}))
    assert outcome.error is None, outcome.error
    # the tool's own marker comments name the tool, not a device
    result = BY_DEVICE_TYPE.sub("", (outcome.new_text or source).replace("(npu-migrate)", ""))
    assert len(NPU_SPELLING.findall(result)) <= len(NPU_SPELLING.findall(source)), result


def test_a_report_only_rule_adds_no_import_under_portable() -> None:
    """NPU171 plans `import torch_npu` on the way down (visit_Attribute); under portable it only
    reports, so the import must not reach the file (nanoGPT's bench.py got one)."""
    src = ("import torch\ntorch.cuda.synchronize()\n"
           "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:\n    pass\n")
    text = text_of(src)
    assert "torch_npu" not in text and "torch.accelerator.synchronize()" in text
    assert "NPU171" in reported(src)

"""NPU201-NPU207: environment variables and launch commands in Python code."""

from __future__ import annotations

import ast
import itertools

import pytest
import rule_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.analyses import envmap
from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.core.diagnostics import Severity

ENV_CODES = ["NPU201", "NPU202", "NPU203", "NPU204", "NPU205", "NPU206", "NPU207"]


def run(text: str, select=ENV_CODES):
    return rule_cases.migrate(text, select, "x.py")


def migrated(text: str, select=ENV_CODES) -> str:
    return rule_cases.after(text, select, "x.py")


codes = rule_cases.codes_with_severity


# The before/after examples are the CASES of NPU201-NPU207 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_rewrite_keeps_comments_and_formatting() -> None:
    before = ('import os\nos.environ[ "CUDA_VISIBLE_DEVICES" ]  =  "0"   # pick a GPU\n'
              'x = {\n    "CUDA_LAUNCH_BLOCKING": "1",  # debug\n}\n')
    after = ('import os\nos.environ[ "ASCEND_RT_VISIBLE_DEVICES" ]  =  "0"   # pick a GPU\n'
             'x = {\n    "ASCEND_LAUNCH_BLOCKING": "1",  # debug\n}\n')
    assert migrated(before) == after


def test_edits_are_explained_with_codes_and_lines() -> None:
    outcome = run('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nos.environ["NCCL_BUFFSIZE"] = "2097152"\n')
    assert [(e.code, e.line) for e in outcome.edits] == [("NPU201", 2), ("NPU203", 3)]
    assert "HCCL_BUFFSIZE=2" in outcome.edits[1].message


def test_descending_ids_are_an_error_and_stay_reported_after_migration() -> None:
    text = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "3,1,2"\n'
    outcome = run(text)
    assert codes(outcome) == [("NPU201", 2, "error")]
    assert "1,2,3" in outcome.diagnostics[0].message
    again = run(outcome.new_text)
    assert again.new_text is None and codes(again) == [("NPU201", 2, "error")]


def test_module_constant_value_is_checked() -> None:
    outcome = run('import os\nGPUS = "1,1"\nos.environ["CUDA_VISIBLE_DEVICES"] = GPUS\n')
    assert codes(outcome) == [("NPU201", 3, "error")]


def test_computed_device_list_is_noted() -> None:
    outcome = run('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = str(rank)\n')
    assert 'ASCEND_RT_VISIBLE_DEVICES"] = str(rank)' in outcome.new_text
    assert codes(outcome) == [("NPU201", 2, "info")]


def test_non_numeric_device_list_is_a_warning() -> None:
    outcome = run('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0, 1"\n')
    assert codes(outcome) == [("NPU201", 2, "warning")]
    assert "sees `0,`" in outcome.diagnostics[0].message


def test_computed_or_read_buffsize_is_flagged_not_renamed() -> None:
    text = ('import os\nBUF = "4194304"\nos.environ["NCCL_BUFFSIZE"] = str(4 << 20)\n'
            'os.environ["NCCL_BUFFSIZE"] = BUF\nsize = int(os.getenv("NCCL_BUFFSIZE", "0"))\n')
    outcome = run(text)
    assert outcome.new_text is None
    assert codes(outcome) == [("NPU203", 3, "warning"), ("NPU203", 4, "warning"), ("NPU203", 5, "warning")]
    assert "HCCL_BUFFSIZE=4" in outcome.diagnostics[1].message


def test_buffsize_not_whole_mb_is_rounded_up_with_a_note() -> None:
    outcome = run('import os\nos.environ["NCCL_BUFFSIZE"] = "1500000"\n')
    assert '"HCCL_BUFFSIZE"] = "2"' in outcome.new_text
    assert codes(outcome) == [("NPU203", 2, "info")]


def test_alloc_conf_cuda_only_key_is_an_error() -> None:
    outcome = run('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"\n')
    assert 'PYTORCH_NPU_ALLOC_CONF"] = "backend:cudaMallocAsync"' in outcome.new_text
    assert codes(outcome) == [("NPU204", 2, "error")]
    assert "delete `backend:cudaMallocAsync`" in outcome.diagnostics[0].message


def test_alloc_conf_expandable_with_max_split_is_an_error() -> None:
    outcome = run('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = '
                  '"expandable_segments:True,max_split_size_mb:512"\n')
    assert codes(outcome) == [("NPU204", 2, "error")]
    assert "max_split_size_mb" in outcome.diagnostics[0].message


def test_alloc_conf_npu_name_is_checked_too() -> None:
    outcome = run('import os\nos.environ["PYTORCH_NPU_ALLOC_CONF"] = "pinned_use_cuda_host_register:True"\n')
    assert outcome.new_text is None and codes(outcome) == [("NPU204", 2, "error")]


def test_alloc_conf_newer_key_warns_about_old_releases() -> None:
    outcome = run('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "pinned_use_background_threads:True"\n')
    assert codes(outcome) == [("NPU204", 2, "warning")]


def test_alloc_conf_brackets_do_not_split_keys() -> None:
    items = envmap.split_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:4], expandable_segments:False")
    assert [(k, v) for k, v, _, _ in items] == [("roundup_power2_divisions", "[256:1,512:2,>:4]"),
                                                 ("expandable_segments", "False")]
    _, problems, _ = envmap.check_alloc_conf("X", "roundup_power2_divisions:[256:1,512:2,>:4]")
    assert problems == []


def test_variables_without_counterpart_are_flagged() -> None:
    outcome = run('import os\nos.environ["NCCL_DEBUG"] = "INFO"\nos.environ["NCCL_ALGO"] = "Ring"\n'
                  'os.environ["TORCH_NCCL_AVOID_RECORD_STREAMS"] = "1"\nos.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"\n')
    assert outcome.new_text is None
    assert codes(outcome) == [("NPU205", 2, "info"), ("NPU205", 3, "warning"), ("NPU205", 4, "warning"),
                              ("NPU205", 5, "info")]
    assert "HCCL_ALGO" in outcome.diagnostics[1].message


def test_nvidia_smi_in_commands_is_flagged() -> None:
    outcome = run('import subprocess\nout = subprocess.check_output(["nvidia-smi", "-L"])\n'
                  'n = subprocess.getoutput("nvidia-smi --query-gpu=name --format=csv")\n')
    assert codes(outcome) == [("NPU207", 2, "warning"), ("NPU207", 3, "warning")]


def test_suppression_keeps_the_line() -> None:
    text = ('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1,0"  # npu-migrate: ignore[NPU201]\n'
            'os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # npu-migrate: ignore[NPU202]\n')
    outcome = run(text)
    assert outcome.new_text is None and outcome.diagnostics == []


def test_each_code_selects_only_its_part() -> None:
    text = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nos.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n'
    assert migrated(text, ["NPU202"]) == text.replace("CUDA_LAUNCH", "ASCEND_LAUNCH")
    assert migrated(text, ["NPU201"]) == text.replace("CUDA_VISIBLE", "ASCEND_RT_VISIBLE")


def test_migrated_writes_and_reads_still_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASCEND_RT_VISIBLE_DEVICES", "HCCL_BUFFSIZE", "ASCEND_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)
    text = ('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\nos.environ["NCCL_BUFFSIZE"] = "4194304"\n'
            'os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")\n'
            'RESULT = (os.environ.get("CUDA_VISIBLE_DEVICES"), os.getenv("CUDA_LAUNCH_BLOCKING"), '
            'os.environ.get("HCCL_BUFFSIZE"))\n')
    scope: dict = {}
    exec(compile(migrated(text), "x.py", "exec"), scope)
    assert scope["RESULT"] == ("0,1", "1", "4")
    import os
    assert "CUDA_VISIBLE_DEVICES" not in os.environ or os.environ["CUDA_VISIBLE_DEVICES"] != "0,1"
    for name in ("ASCEND_RT_VISIBLE_DEVICES", "HCCL_BUFFSIZE", "ASCEND_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=15), min_size=1, max_size=6))
def test_device_list_check_matches_strict_ascending(ids: list[int]) -> None:
    value = ",".join(map(str, ids))
    problems = envmap.check_device_list("V", value)
    ascending = all(a < b for a, b in itertools.pairwise(ids))
    assert (problems == []) == ascending
    if not ascending:
        assert problems[0].severity is Severity.ERROR


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=1 << 34))
def test_bytes_to_mb_rounds_up(count: int) -> None:
    mb, exact = envmap.bytes_to_mb(str(count))
    assert mb * envmap.MB >= count > (mb - 1) * envmap.MB
    assert exact == (count % envmap.MB == 0)
    assert envmap.bytes_to_mb(hex(count)) == (mb, exact)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "NCCL_BUFFSIZE",
                        "PYTORCH_CUDA_ALLOC_CONF", "TORCH_NCCL_HIGH_PRIORITY"]),
       st.sampled_from(["0", "1,2", "4194304", "max_split_size_mb:64", "x"]),
       st.sampled_from(['os.environ[{k!r}] = {v!r}', 'os.environ.setdefault({k!r}, {v!r})',
                        'env = {{{k!r}: {v!r}}}', 'os.system("{k}={v} python t.py")']))
def test_any_site_is_idempotent_and_parses(name: str, value: str, template: str) -> None:
    text = "import os\n" + template.format(k=name, v=value) + "\n"
    once = migrated(text)
    ast.parse(once)
    assert migrated(once) == once


_VALUES = {"device_list": "0,1", "rename": "1", "bytes_to_mb": "4194304",
           "alloc_conf": "expandable_segments:True", "flag": "1"}


def _env_entries() -> list[dict]:
    return envmap.load("env_vars.json")["entries"]


def _env_cases() -> list[tuple[dict, str]]:
    cases = []
    for entry in _env_entries():
        names = [entry["cuda"][:-1] + "EXAMPLE"] if entry["cuda"].endswith("*") else [entry["cuda"]]
        cases += [(entry, name) for name in names + entry.get("also", [])]
    return cases


@pytest.mark.parametrize("entry,name", _env_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_env_entry_in_python_and_shell(entry: dict, name: str) -> None:
    value = _VALUES[entry["kind"]]
    cases = [(f'import os\nos.environ["{name}"] = "{value}"\n', "x.py", entry["code"]),
             (f"export {name}={value}\n", "run.sh", entry["shell_code"])]
    for text, path, code in cases:
        outcome = migrate_text(text, path, RuleSet(select_rules(all_rules())))
        if entry["action"] == "rewrite":
            assert outcome.new_text is not None and entry["npu"] in outcome.new_text
            assert name not in outcome.new_text
            assert {e.code for e in outcome.edits} == {code}
        else:
            assert outcome.new_text is None
            assert [d.code for d in outcome.diagnostics] == [code]
            if entry.get("npu"):
                assert entry["npu"] in outcome.diagnostics[0].message

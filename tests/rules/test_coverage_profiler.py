"""NPU170 nvtx → mstx, NPU171 torch.profiler → torch_npu.profiler, NPU172 autograd profiler
use_cuda, NPU173 CUDA-only profiler APIs."""

from __future__ import annotations

from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU170", "NPU171", "NPU172", "NPU173"]
N = "import torch_npu  # noqa: F401\n"


# The before/after examples are the CASES of NPU170-NPU173 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_range_push_pop_need_a_recent_torch_npu() -> None:
    outcome = migrate("import torch\ntorch.cuda.nvtx.range_push('a')\ntorch.cuda.nvtx.range_pop()\n", CODES)
    assert "torch_npu.npu.mstx.range_push('a')" in outcome.new_text
    assert codes_at(outcome) == [("NPU170", 2), ("NPU170", 3)]
    assert all(d.severity.value == "info" and "26." in d.message for d in outcome.diagnostics)


def test_nvtx_range_with_format_arguments_is_reported_not_rewritten() -> None:
    src = "import torch\nwith torch.cuda.nvtx.range('step {}', i):\n    pass\n"
    outcome = migrate(src, CODES)
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU170", 2)]


def test_unknown_nvtx_member_is_reported() -> None:
    outcome = migrate("import torch\ntorch.cuda.nvtx._device_range_start('x')\n", CODES)
    assert outcome.new_text is None and codes_at(outcome) == [("NPU170", 2)]


def test_profile_keywords_torch_npu_lacks() -> None:
    src = "import torch\np = torch.profiler.profile(acc_events=True, post_processing_timeout_s=3.0)\n"
    outcome = migrate(src, CODES)
    assert "torch_npu.profiler.profile(acc_events=True" in outcome.new_text
    assert codes_at(outcome) == [("NPU171", 2), ("NPU171", 2)]


def test_cuda_experimental_config_is_reported() -> None:
    src = ("import torch\ncfg = torch._C._profiler._ExperimentalConfig(verbose=True)\n"
           "p = torch.profiler.profile(experimental_config=cfg)\n")
    outcome = migrate(src, CODES)
    assert codes_at(outcome) == [("NPU171", 2)]
    assert "torch_npu.profiler._ExperimentalConfig" in outcome.diagnostics[0].message


def test_cuda_profiler_and_emit_nvtx_are_reported() -> None:
    src = ("import torch\nimport torch.cuda.profiler as cp\ntorch.cuda.profiler.start()\ncp.stop()\n"
           "with torch.autograd.profiler.emit_nvtx():\n    pass\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text is None
    # the alias is reported at its import (line 2); `cp.stop()` (line 4) is reported when the
    # engine parses its statement (its text shows no CUDA profiler name: the prefilter may skip it)
    found = codes_at(outcome)
    assert {("NPU173", 2), ("NPU173", 3), ("NPU173", 5)} <= set(found) <= {("NPU173", n) for n in (2, 3, 4, 5)}


def test_unchanged() -> None:
    src = ("import torch\nfrom torch.profiler import record_function\nwith record_function('x'):\n    pass\n"
           "with torch.autograd.profiler.profile() as p:\n    pass\nx = nvtx.range_push('a')\n"
           "t = torch.profiler.ProfilerActivity\n")
    outcome = migrate(src, ["NPU170", "NPU172", "NPU173"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_other_profiler_activity_members_are_reported() -> None:
    outcome = migrate("import torch\na = torch.profiler.ProfilerActivity.XPU\n", CODES)
    assert outcome.new_text is None and codes_at(outcome) == [("NPU171", 2)]

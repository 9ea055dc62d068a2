"""NPU160-NPU164: torch.backends.cuda / torch.backends.cudnn knobs."""

from __future__ import annotations

from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU160", "NPU161", "NPU162", "NPU163", "NPU164"]
N = "import torch_npu  # noqa: F401\n"


# The before/after examples are the CASES of NPU160-NPU164 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_the_classic_training_header() -> None:
    """The lines most training scripts start with: TF32 rewritten, `benchmark` removed,
    `deterministic` explained."""
    src = ("import torch\n\ntorch.backends.cudnn.benchmark = True\ntorch.backends.cudnn.deterministic = True\n"
           "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text.endswith("\n\ntorch.backends.cudnn.deterministic = True\n"
                                     "torch.npu.matmul.allow_hf32 = True\ntorch.npu.conv.allow_hf32 = True\n")
    assert "benchmark" not in outcome.new_text
    assert [(e.code, e.line) for e in outcome.edits if e.code == "NPU161"] == [("NPU161", 3)]
    assert codes_at(outcome) == [("NPU161", 4)]
    by_line = {d.line: d for d in outcome.diagnostics}
    assert by_line[4].severity.value == "warning"
    assert "torch.use_deterministic_algorithms" in by_line[4].message
    assert "set_deterministic_level" in by_line[4].message


def test_cudnn_module_alias_and_from_import() -> None:
    src = ("import torch.backends.cudnn as cudnn\n\n\ndef setup():\n    from torch.backends import cudnn\n"
           "    cudnn.benchmark = True\n    cudnn.deterministic = True\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text == src.replace("    cudnn.benchmark = True\n", "")
    assert [(e.code, e.line) for e in outcome.edits] == [("NPU161", 6)]
    assert codes_at(outcome) == [("NPU161", 7)]


def test_sdp_switches_are_reported_with_the_replacement() -> None:
    src = ("import torch\nfrom torch.backends.cuda import sdp_kernel\n"
           "with sdp_kernel(enable_flash=False, enable_math=True):\n    pass\n"
           "torch.backends.cuda.enable_flash_sdp(False)\nok = torch.backends.cuda.flash_sdp_enabled()\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU162", 2), ("NPU162", 3), ("NPU162", 5), ("NPU162", 6)]
    assert all("sdpa_kernel" in d.message and "use_compatible_impl" in d.message for d in outcome.diagnostics)


def test_plan_cache_index_and_size_limits() -> None:
    src = ("import torch\ntorch.backends.cuda.cufft_plan_cache[0].max_size = 10\n"
           "torch.backends.cuda.cufft_plan_cache.max_size = 512\n")
    outcome = migrate(src, CODES)
    assert "torch.backends.cuda.cufft_plan_cache[0].max_size = 10" in outcome.new_text  # not rewritten
    assert "torch.npu.backends.fft_plan_cache.max_size = 512" in outcome.new_text
    assert codes_at(outcome) == [("NPU163", 2), ("NPU163", 3)]
    assert "1 and 99" in outcome.diagnostics[1].message


def test_build_queries_are_info() -> None:
    src = "import torch\nif torch.backends.cudnn.is_available() and torch.backends.cudnn.version() > 8000:\n    pass\n"
    outcome = migrate(src, CODES)
    assert codes_at(outcome) == [("NPU164", 2), ("NPU164", 2)]
    assert {d.severity.value for d in outcome.diagnostics} == {"info"}


def test_unchanged() -> None:
    src = ("import torch\ntorch.backends.mps.is_available()\ntorch.backends.mkldnn.enabled = True\n"
           "torch.set_float32_matmul_precision('high')\nx = config.backends.cudnn.benchmark\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text is None and outcome.diagnostics == []


def test_rules_work_in_a_function_body_chunk() -> None:
    """The engine may hand a function's statements over one by one: names still resolve."""
    src = ("import torch\n\n\ndef setup(fast):\n    x = 1\n    torch.backends.cuda.matmul.allow_tf32 = fast\n"
           "    torch.backends.cudnn.benchmark = fast\n    return x\n")
    outcome = migrate(src, CODES)
    assert "    torch.npu.matmul.allow_hf32 = fast\n    return x\n" in outcome.new_text
    assert [(e.code, e.line) for e in outcome.edits if e.code == "NPU161"] == [("NPU161", 7)]
    assert codes_at(outcome) == []


# NPU161 removing `cudnn.benchmark = ...`: what its CASES cannot show (line endings, tabs, the edit
# it records, lines other rules rewrite too)

def test_a_removed_flag_leaves_exactly_its_line_with_crlf_and_tabs() -> None:
    crlf = "import torch\r\nx = 1\r\n\r\ntorch.backends.cudnn.benchmark = True\r\ny = 2\r\n"
    assert after(crlf, ["NPU161"]) == "import torch\r\nx = 1\r\n\r\ny = 2\r\n"
    tabs = "import torch\n\n\ndef f():\n\tx = 1\n\n\ttorch.backends.cudnn.benchmark = x\n\treturn x\n"
    assert after(tabs, ["NPU161"]) == tabs.replace("\ttorch.backends.cudnn.benchmark = x\n", "")
    assert_idempotent(tabs, ["NPU161"])
    # a form feed ends no line for Python: the comment above the second flag is still seen there
    feed = "import torch\n\x0c\nx = 1\ntorch.backends.cudnn.benchmark = True\n# note\ntorch.backends.cudnn.benchmark = False\n"
    outcome = migrate(feed, ["NPU161"])
    assert outcome.new_text == feed.replace("torch.backends.cudnn.benchmark = True\n", "")
    assert codes_at(outcome) == [("NPU161", 6)]


def test_the_removal_is_recorded_where_the_statement_was() -> None:
    outcome = migrate("import torch\nif ok: a = 1; torch.backends.cudnn.benchmark = not ok\n", ["NPU161"])
    assert outcome.new_text == "import torch\nif ok: a = 1\n"
    [edit] = outcome.edits
    assert (edit.code, edit.line, edit.col) == ("NPU161", 2, 15)
    assert edit.message.startswith("removed `torch.backends.cudnn.benchmark = not ok`: no NPU code reads")


def test_other_rules_rewrite_the_rest_of_a_line_the_flag_leaves() -> None:
    src = "import torch\nx = x.cuda(); torch.backends.cudnn.benchmark = True\n"
    outcome = migrate(src, ["NPU101", "NPU161"])
    assert outcome.new_text.endswith("\nx = x.npu()\n")
    assert sorted((e.code, e.line) for e in outcome.edits) == [("NPU100", 2), ("NPU101", 2), ("NPU161", 2)]
    assert outcome.diagnostics == []


def test_a_line_another_rule_rebuilds_keeps_the_flag_and_reports_it() -> None:
    """The `from torch.cuda import` that NPU170 splits rebuilds the whole line: the flag on it
    stays, and is reported rather than dropped in silence."""
    src = "import torch\nfrom torch.cuda import nvtx, foo; torch.backends.cudnn.benchmark = True\n"
    outcome = migrate(src, ["NPU161", "NPU170"])
    assert "from torch.cuda import foo; torch.backends.cudnn.benchmark = True\n" in outcome.new_text
    assert codes_at(outcome) == [("NPU161", 2)]
    assert [e.code for e in outcome.edits if e.code == "NPU161"] == []

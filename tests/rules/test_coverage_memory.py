"""NPU155 torch.cuda.memory through the submodule, NPU156 _record_memory_history arguments."""

from __future__ import annotations

import ast
import inspect

import torch.cuda.memory
from rule_cases import codes_at, for_codes

from codemods.api.cases import Invalid, cases_of
from codemods.api.registry import builtin_rules

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU155", "NPU156"]
H = "import torch\n"
N = "import torch\nimport torch_npu  # noqa: F401\n"


# The before/after examples are the CASES of NPU155 and NPU156 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_dropped_keywords_are_reported_one_by_one() -> None:
    src = H + "torch.cuda.memory._record_memory_history(True, clear_history=True, compile_context=True)\n"
    outcome = migrate(src, CODES)
    assert 'torch.npu.memory._record_memory_history("all")' in outcome.new_text
    messages = [d.message for d in outcome.diagnostics]
    assert any("clear_history" in m for m in messages) and any("compile_context" in m for m in messages)
    assert codes_at(outcome) == [("NPU156", 2), ("NPU156", 2)]


def test_result_binds_to_torch_npu_signature() -> None:
    """Every rewritten call binds to torch_npu's `_record_memory_history_impl` parameters
    (enabled, context, stacks, max_entries, device), written here from fact sheet §2.2."""
    def npu_impl(enabled="all", context="all", stacks="all", max_entries=0, device=None):
        return enabled, context, stacks, max_entries
    examples = [case for rule in builtin_rules() if rule.code in CODES for case in cases_of(rule)
                if isinstance(case, Invalid) and case.after is not None]
    assert examples
    calls = [node for case in examples for node in ast.walk(ast.parse(case.after))
             if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("_record_memory_history")]
    assert calls
    for call in calls:
        bound = eval(ast.unparse(ast.Call(ast.Name("npu_impl"), call.args, call.keywords)),  # our own output
                     {"npu_impl": npu_impl, "flag": True, "n": 7, "cpp": False})
        assert bound[0] in ("all", "state", None) and bound[1] in ("all", "state", "alloc", None)
        assert bound[2] in ("all", "python")


def test_legacy_rewrite_matches_upstream_legacy_parameter_order() -> None:
    """The positional order used for the bool form is upstream's legacy order."""
    legacy = list(inspect.signature(torch.cuda.memory._record_memory_history_legacy).parameters)
    from codemods.rules.npu156_record_memory_history_arguments import _CURRENT, _LEGACY
    assert list(_LEGACY) == legacy
    current = list(inspect.signature(torch.cuda.memory._record_memory_history).parameters)
    assert list(_CURRENT) == current[:5]


def test_unknown_enabled_value_gets_a_hint() -> None:
    outcome = migrate(H + "torch.cuda.memory._record_memory_history(cfg.enabled)\n", CODES)
    assert [(d.code, d.severity.value) for d in outcome.diagnostics] == [("NPU156", "info")]


def test_too_many_positional_arguments_reported_not_rewritten() -> None:
    src = H + 'torch.npu.memory._record_memory_history("all", "all", "all", 1, None, True)\n'
    outcome = migrate(src, CODES)
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU156", 2)]


def test_snapshot_fx_traces_is_reported() -> None:
    outcome = migrate(H + "s = torch.cuda.memory._snapshot(augment_with_fx_traces=True)\n", CODES)
    assert "torch.npu.memory._snapshot(augment_with_fx_traces=True)" in outcome.new_text
    assert codes_at(outcome) == [("NPU156", 2)]


def test_members_without_counterpart_are_reported() -> None:
    src = "from torch.cuda import memory\nmemory.list_gpu_processes()\nmemory.some_private_thing()\n"
    outcome = migrate(src, CODES)
    assert outcome.new_text.startswith("import torch_npu  # noqa: F401\nfrom torch_npu.npu import memory\n")
    assert codes_at(outcome) == [("NPU155", 2), ("NPU155", 3)]


def test_suppression_comment_keeps_the_line() -> None:
    src = H + "torch.cuda.memory._record_memory_history(True)  # npu-migrate: ignore[NPU155,NPU156]\n"
    outcome = migrate(src, CODES)
    assert outcome.new_text is None

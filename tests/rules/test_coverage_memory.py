"""NPU155 torch.cuda.memory through the submodule, NPU156 _record_memory_history arguments."""

from __future__ import annotations

import inspect

import pytest
import torch.cuda.memory
from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU155", "NPU156"]
H = "import torch\n"
N = "import torch\nimport torch_npu  # noqa: F401\n"

REWRITES = [
    # the legacy bool form (upstream dispatches it to _record_memory_history_legacy)
    (H + "torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100000)\n",
     N + 'torch.npu.memory._record_memory_history("all", max_entries=100000)\n'),
    (H + "torch.cuda.memory._record_memory_history(False)\n",
     N + "torch.npu.memory._record_memory_history(None)\n"),
    (H + "torch.cuda.memory._record_memory_history(enabled=True, record_context=False)\n",
     N + 'torch.npu.memory._record_memory_history("all", context=None)\n'),
    (H + "torch.cuda.memory._record_memory_history(True, True, 5000, True, None, True)\n",
     N + 'torch.npu.memory._record_memory_history("all", stacks="all", max_entries=5000, device=None)\n'),
    (H + "torch.cuda.memory._record_memory_history(flag, trace_alloc_max_entries=n, record_context_cpp=cpp)\n",
     N + 'torch.npu.memory._record_memory_history("all" if flag else None, stacks="all" if cpp else "python", '
         'max_entries=n)\n'),
    # the current form with keywords torch_npu rejects
    (H + 'torch.cuda.memory._record_memory_history("all", max_entries=10, clear_history=True)\n',
     N + 'torch.npu.memory._record_memory_history("all", max_entries=10)\n'),
    (H + "torch.cuda.memory._record_memory_history(\n    max_entries=10,\n    skip_actions=['free'],\n)\n",
     N + "torch.npu.memory._record_memory_history(\n    max_entries=10,\n)\n"),
    # already NPU: only the arguments
    ("import torch_npu\ntorch_npu.npu.memory._record_memory_history(True)\n",
     'import torch_npu\ntorch_npu.npu.memory._record_memory_history("all")\n'),
    # through a from-import
    ("from torch.cuda.memory import _record_memory_history\n_record_memory_history(True)\n",
     'import torch_npu  # noqa: F401\nfrom torch_npu.npu.memory import _record_memory_history\n'
     '_record_memory_history("all")\n'),
    # the submodule
    (H + "a = torch.cuda.memory.memory_allocated(0)\nb = torch.cuda.memory.mem_get_info()\n",
     N + "a = torch.npu.memory.memory_allocated(0)\nb = torch.npu.mem_get_info()\n"),
    ("from torch.cuda import memory as cm\ncm.empty_cache()\n",
     "import torch_npu  # noqa: F401\nfrom torch_npu.npu import memory as cm\ncm.empty_cache()\n"),
    ("import torch.cuda.memory as cm\ncm.memory_reserved()\n",
     "import torch_npu  # noqa: F401\nfrom torch_npu.npu import memory as cm\ncm.memory_reserved()\n"),
    ("import torch as th\nth.cuda.memory._dump_snapshot('s.pickle')\n",
     "import torch as th\nimport torch_npu  # noqa: F401\nth.npu.memory._dump_snapshot('s.pickle')\n"),
]

UNCHANGED = [
    'import torch_npu\ntorch_npu.npu.memory._record_memory_history("all", context="state", max_entries=5)\n',
    "import torch\ntorch.npu.memory._record_memory_history(enabled=None)\n",
    "import torch\nself.memory._record_memory_history(True)\n",  # not torch's
    "import torch\nx = torch.cuda.memory_allocated()\n",  # NPU120's, not the submodule
]


@pytest.mark.parametrize("before,expected", REWRITES)
def test_rewrites(before: str, expected: str) -> None:
    assert after(before, CODES) == expected
    assert_idempotent(before, CODES)


@pytest.mark.parametrize("src", UNCHANGED)
def test_unchanged(src: str) -> None:
    outcome = migrate(src, CODES)
    assert outcome.new_text is None and outcome.diagnostics == []


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
    for before, _ in REWRITES:
        if "_record_memory_history(" not in before:
            continue
        text = after(before, CODES)
        call = text[text.index("_record_memory_history(") + len("_record_memory_history"):].split("\n\n")[0]
        values = {"flag": True, "n": 7, "cpp": False}
        bound = eval(f"npu_impl{call}", {"npu_impl": npu_impl, **values})  # our own output
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

"""MEM007: the advice follows the findings and never combines settings torch_npu refuses."""

from __future__ import annotations

import re

import pytest

from npu_migrate.memory.advice import advise, split_limit_mb
from npu_migrate.memory.loader import normalise
from npu_migrate.memory.report import build_contexts
from npu_migrate.memory.synthetic import training_snapshot

REFUSED = re.compile(r"expandable_segments:True.*(max_split_size_mb|garbage_collection_threshold)"
                     r"|(max_split_size_mb|garbage_collection_threshold).*expandable_segments:True")


@pytest.fixture(scope="module")
def contexts():
    data = training_snapshot(target_events=6000, layers=4)
    data.pop("_facts")
    return build_contexts(normalise(data, "syn"))


def env_setting(message: str) -> str:
    match = re.search(r'PYTORCH_NPU_ALLOC_CONF="([^"]*)"', message)
    return match.group(1) if match else ""


@pytest.mark.parametrize("facts, expected", [
    ({"forced_segments": [(1, 2, 3, 4, 5)], "expandable": False}, "expandable_segments:True"),
    ({"oom_fragmented": True, "expandable": False}, "expandable_segments:True"),
    ({"forced_segments": [(1, 2, 3, 4, 5)], "expandable": True}, "max_split_size_mb:"),
    ({"unused_at_peak_reserved": 3 << 30, "peak_reserved": 4 << 30, "expandable": False},
     "garbage_collection_threshold:0.8"),
])
def test_advice_follows_findings(contexts, facts, expected):
    ctx = contexts[0]
    saved = dict(ctx.facts)
    ctx.facts.update({"forced_segments": [], "oom_fragmented": False}, **facts)
    try:
        findings, table = advise(contexts, "syn")
    finally:
        ctx.facts.clear()
        ctx.facts.update(saved)
    assert len(findings) == 1 and expected in findings[0].message
    assert not REFUSED.search(env_setting(findings[0].message))
    assert table is not None and any(expected.split(":")[0] in str(r[1]) for r in table.rows)
    # a PyTorch snapshot never gets TensorFlow's MemoryConfig
    assert not any("MemoryConfig" in str(r[1]) for r in table.rows)
    assert "MemoryConfig" not in findings[0].message


def test_tensorflow_source_gets_memory_config_only(contexts):
    ctx = contexts[0]
    saved = dict(ctx.facts)
    ctx.facts.update(forced_segments=[(1, 2, 3, 4, 5)], expandable=False, oom_short=True)
    ctx.snapshot.framework = "tensorflow"
    try:
        findings, table = advise(contexts, "syn")
    finally:
        ctx.snapshot.framework = "pytorch"
        ctx.facts.clear()
        ctx.facts.update(saved)
    assert "MemoryConfig(static_memory_policy=3)" in findings[0].message
    assert "PYTORCH_NPU_ALLOC_CONF" not in findings[0].message
    assert {r[1] for r in table.rows} == {"MemoryConfig(static_memory_policy=3)",
                                         "MemoryConfig(atomic_clean_policy=1)"}


def test_other_frameworks_get_no_pytorch_setting(contexts):
    ctx = contexts[0]
    saved = dict(ctx.facts)
    ctx.facts.update(forced_segments=[(1, 2, 3, 4, 5)], expandable=False)
    ctx.snapshot.framework = "mindspore"
    try:
        assert advise(contexts, "syn") == ([], None)
    finally:
        ctx.snapshot.framework = "pytorch"
        ctx.facts.clear()
        ctx.facts.update(saved)


def test_no_findings_no_advice(contexts):
    ctx = contexts[0]
    saved = dict(ctx.facts)
    ctx.facts.update(forced_segments=[], oom_fragmented=False, unused_at_peak_reserved=0)
    try:
        assert advise(contexts, "syn") == ([], None)
    finally:
        ctx.facts.clear()
        ctx.facts.update(saved)


def test_split_limit_is_a_power_of_two_above_common_blocks(contexts):
    limit = split_limit_mb(contexts)
    assert limit & (limit - 1) == 0
    sizes = contexts[0].rep.blocks.size
    big = sizes[sizes > (1 << 20)]
    assert (big <= limit << 20).mean() >= 0.9

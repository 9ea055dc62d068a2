"""Cases the real files lack: ProfilerStep#N steps, private pools, workspace triples,
ring-buffer truncation, pending frees; plus a property test of the replay."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npu_migrate.memory.loader import normalise
from npu_migrate.memory.replay import STATE_PENDING, replay
from npu_migrate.memory.report import analyze
from npu_migrate.memory.scenarios import idle_cases
from npu_migrate.memory.synthetic import (
    LEAK_BYTES, STACKS, SimulatedAllocator, as_torch_npu, training_snapshot, truncate,
)
from .reference import replay as reference_replay


def snapshot(**kwargs):
    data = training_snapshot(**kwargs)
    facts = data.pop("_facts")
    return data, facts


def test_profiler_steps_and_leak_per_step():
    data, facts = snapshot(target_events=15000, layers=6)
    report, (ctx,) = analyze(normalise(data, "syn"))
    starts = [a["time_us"] for a in data["external_annotations"] if a["stage"] == "START"]
    assert len(ctx.steps) == len(starts) == facts["steps"]
    assert "ProfilerStep" in ctx.steps.source
    # each boundary is the first event at or after its annotation
    times = [e["time_us"] for e in data["device_traces"][0]]
    for start, time in zip(ctx.steps.starts, starts):
        assert times[start] >= time and (start == 0 or times[start - 1] < time)
    leaks = [f for f in report.findings if f.code == "MEM001"]
    assert len(leaks) == 1 and "train.py:48 (train_step)" in leaks[0].message
    assert f"about {LEAK_BYTES / 1024:.2f} KiB per step" in leaks[0].message
    assert ctx.facts["growth_per_step"] == LEAK_BYTES


def test_no_leak_without_the_leaking_line():
    data, _ = snapshot(target_events=8000, layers=4, leak=False)
    report, _ = analyze(normalise(data, "syn"))
    assert not any(f.code == "MEM001" for f in report.findings)


def test_private_pool_segments_are_kept_apart():
    data, _ = snapshot(target_events=6000, layers=4, private_pool=True)
    snap = normalise(data, "syn")
    pools = {s.pool_id for s in snap.segments}
    assert pools == {(0, 0), (1, 7)}
    _, (ctx,) = analyze(snap)
    assert ctx.facts["private_pools"] == [(1, 7)]
    rep = ctx.rep
    pool = ctx.pool(rep.n_events - 1)
    assert {s.pool_id for s in pool.segments} == pools


def test_workspace_triples_balance_the_replay():
    data, _ = snapshot(target_events=4000, layers=4)
    npu = as_torch_npu(data, workspace=8 << 20)
    snap = normalise(npu, "npu")
    assert snap.producer == "torch_npu" and snap.traces[0].workspace_heads == 1
    rep = replay(snap, 0)
    assert rep.initial == (0, 0, 0)  # nothing was live before the recording started
    assert rep.allocated.min() >= 0
    plain = replay(normalise(data, "cuda"), 0)
    # the workspace block stays allocated the whole run, on top of the CUDA-shaped replay
    assert (rep.allocated[3:] - plain.allocated == 8 << 20).all()
    assert rep.trace.time_us is None and "event indices" in snap.notes[0]
    report, _ = analyze(snap)
    assert not any(f.code == "MEM006" for f in report.findings)  # a complete trace
    assert any(f.code == "MEM004" and "event " in f.message for f in report.findings)


def test_truncated_trace_is_rebuilt_backwards():
    data, _ = snapshot(target_events=12000, layers=6)
    keep = 5000
    cut = truncate(data, keep)
    full_rep = replay(normalise(data, "full"), 0)
    snap = normalise(cut, "cut")
    rep = replay(snap, 0)
    assert len(rep.trace) == keep
    offset = full_rep.n_events - keep
    assert (rep.allocated == full_rep.allocated[offset:]).all()
    assert (rep.reserved == full_rep.reserved[offset:]).all()
    ref = reference_replay(cut, 0)
    assert rep.allocated.tolist() == ref["allocated"]
    report, _ = analyze(snap)
    notes = [f for f in report.findings if f.code == "MEM006"]
    assert notes and "ring buffer overflowed" in notes[0].message
    before = rep.blocks.alloc < 0
    live_at_start = before & rep.blocks.allocated_at(-1)
    assert {int(a) for a in rep.blocks.addr[live_at_start]} == set(ref["start"])
    # the rest were already freed by the user when the window opened (pending completion)
    assert (rep.blocks.free[before & ~live_at_start] >= 0).all()


def test_pending_free_at_the_end():
    data, _ = snapshot(target_events=3000, layers=4, pending_at_end=True)
    rep = replay(normalise(data, "syn"), 0)
    pending = rep.blocks.state == STATE_PENDING
    assert int(pending.sum()) == 1 and int(rep.blocks.size[pending][0]) == 3 << 20
    assert rep.active[-1] - rep.allocated[-1] == 3 << 20


def test_oom_with_enough_cached_memory_is_called_fragmentation():
    data, _ = snapshot(target_events=3000, layers=4)
    trace = data["device_traces"][0]
    rep = replay(normalise(data, "syn"), 0)
    free_cached = int(rep.reserved[-1] - rep.active[-1])
    trace.append({"action": "oom", "device_free": 1 << 20, "size": free_cached,
                  "stream": trace[-1]["stream"], "time_us": trace[-1]["time_us"] + 1})
    report, (ctx,) = analyze(normalise(data, "syn"))
    oom = [f for f in report.findings if f.code == "MEM003"]
    largest = ctx.pool(len(trace) - 1).largest_gap
    assert oom and ("would have fit" in oom[0].message) == (largest < free_cached)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40)), min_size=5, max_size=120),
       st.integers(0, 60))
def test_replay_matches_reference_for_random_programs(program, keep_from):
    events: list[dict] = []
    alloc = SimulatedAllocator(events, [0], True)
    live: list[int] = []
    rng = random.Random(len(program))
    for is_alloc, kib in program:
        if is_alloc or not live:
            live.append(alloc.alloc(kib * 1024 * 37, STACKS["act"]))
        else:
            alloc.free_block(live.pop(rng.randrange(len(live))), STACKS["act"])
    data = {"segments": alloc.segments_dump(), "device_traces": [events[keep_from:]]}
    rep = replay(normalise(data, "prop"), 0)
    ref = reference_replay(data, 0)
    assert rep.allocated.tolist() == ref["allocated"]
    assert (rep.allocated >= 0).all()
    blocks = rep.blocks
    for event in range(-1, rep.n_events, max(rep.n_events // 5, 1)):
        total = rep.initial[0] if event < 0 else rep.allocated[event]
        assert int(blocks.counted[blocks.allocated_at(event)].sum()) == total
    assert np.all(rep.reserved >= rep.active)


def test_output_held_into_the_next_step_is_wasteful():
    data, _ = snapshot(target_events=8000, layers=12, leak=False, hold_output=True,
                       seq_lengths=(3000,))
    report, (ctx,) = analyze(normalise(data, "syn"))
    found = [f for f in report.findings if f.code == "MEM005"]
    assert found and ("train.py:42 (train_step) (held across iterations until replaced)"
                      in found[0].message)
    assert "allocated long before" not in found[0].message
    peak = ctx.rep.peak_index
    blocks = ctx.rep.blocks
    live = blocks.allocated_at(peak)
    step = ctx.steps.step_of(np.array([peak]))[0]
    lo, hi = ctx.steps.bounds(int(step), ctx.rep.n_events)
    held = (live & (blocks.alloc < lo) & (blocks.alloc >= 0)
            & (blocks.free >= lo) & (blocks.free < hi))
    assert int(blocks.counted[held].sum()) == 3000 * 1024 * 16  # exactly the previous output
    assert sorted(ctx.details[id(found[0])]["blocks"]) == np.flatnonzero(held).tolist()
    clean, _ = analyze(normalise(snapshot(target_events=8000, layers=12, leak=False,
                                          seq_lengths=(3000,))[0], "syn"))
    assert not any(f.code == "MEM005" for f in clean.findings)


IDLE = idle_cases()


@pytest.mark.parametrize("name,data", IDLE, ids=[name for name, _ in IDLE])
def test_idle_blocks_only_where_held_across_iterations(name, data):
    """MEM005 finds the stale reference and leaves alone the blocks that look long-lived but
    are in use (bench/memory_inefficient_review.md)."""
    data = dict(data)
    facts = data.pop("_facts")
    report, _ = analyze(normalise(data, name))
    found = [f for f in report.findings if f.code == "MEM005"]
    if facts.get("idle_site") is None:
        assert not found, found[0].message
        return
    assert len(found) == 1 and f"largest: {facts['idle_site']}" in found[0].message
    assert "allocated long before" not in found[0].message

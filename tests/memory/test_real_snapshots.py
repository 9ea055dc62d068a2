"""Every real pickle in ../shared/snapshots, checked against the plain replay in reference.py."""

from __future__ import annotations

import numpy as np
import pytest

from npu_migrate.memory.loader import load_snapshot
from npu_migrate.memory.model import ACTIONS
from npu_migrate.memory.pool import pool_at
from npu_migrate.memory.replay import replay
from npu_migrate.memory.report import analyze
from .conftest import SHARED, leak_demo, real_file_params
from .reference import load_raw, never_freed_by_site
from .reference import replay as reference_replay


@pytest.fixture(scope="module")
def cache():
    return {}


def loaded(path, cache):
    if path not in cache:
        cache[path] = (load_raw(path), load_snapshot(path))
    return cache[path]


@pytest.mark.parametrize("path", real_file_params())
def test_totals_peak_and_counts(path, cache):
    raw, snap = loaded(path, cache)
    devices = [d for d, t in enumerate(raw["device_traces"]) if t]
    assert devices, "every real file has a trace"
    for device in devices:
        ref = reference_replay(raw, device)
        rep = replay(snap, device)
        assert rep.allocated.tolist() == ref["allocated"]
        assert rep.peak_bytes == ref["peak"] and rep.peak_index == ref["peak_index"]
        assert rep.reserved[-1] == ref["reserved_end"]
        counts = {ACTIONS[a]: int(n) for a, n in zip(*np.unique(rep.trace.action,
                                                                return_counts=True))}
        assert counts == dict(ref["counts"])
        # blocks: one per recorded alloc plus those allocated before the window
        blocks = rep.blocks
        assert int((blocks.alloc >= 0).sum()) == ref["counts"]["alloc"]
        assert int((blocks.alloc < 0).sum()) == len(ref["start"])
        # what is live at the peak, block by block
        live = blocks.allocated_at(rep.peak_index)
        got = {int(a): int(s) for a, s in zip(blocks.addr[live], blocks.counted[live])}
        assert got == ref["peak_live"]


@pytest.mark.parametrize("path", real_file_params())
def test_pool_state_matches_final_segments_and_reserved(path, cache):
    raw, snap = loaded(path, cache)
    for device, trace in enumerate(raw["device_traces"]):
        if not trace:
            continue
        rep = replay(snap, device)
        ref = reference_replay(raw, device)
        final = pool_at(snap, rep, rep.n_events - 1)
        inactive = sum(b["size"] for s in raw["segments"] if s.get("device", 0) == device
                       for b in s["blocks"] if b["state"] == "inactive")
        assert final.free == inactive
        assert final.reserved == ref["reserved_end"]
        for event in np.linspace(0, rep.n_events - 1, 7).astype(int).tolist():
            pool = pool_at(snap, rep, event)
            assert pool.reserved == rep.reserved[event]
            assert pool.free >= 0 and all(s.free >= 0 for s in pool.segments)


@pytest.mark.parametrize("path", real_file_params())
def test_report_runs_and_reports_the_peak(path, cache):
    raw, snap = loaded(path, cache)
    report, contexts = analyze(snap)
    peaks = [f for f in report.findings if f.code == "MEM004"]
    assert len(peaks) == len([t for t in raw["device_traces"] if t])
    for ctx in contexts:
        if ctx.rep.n_events:
            ref = reference_replay(raw, ctx.device)
            assert any(f"device {ctx.device}:" in f.message and
                       f"at event {ref['peak_index']}" in f.message for f in peaks)


@pytest.mark.parametrize("name", ["snapshot_expandable.pkl", "snapshot_with_empty_cache.pkl",
                                  "snapshot_with_empty_cache_expandable.pkl",
                                  "snapshot_with_multi_devices.pkl"])
def test_leak_demo_is_diagnosed_with_its_site(name):
    path = leak_demo(name)
    raw = load_raw(path)
    sites = never_freed_by_site(raw, 0, "memory_leaks_demo.py")
    # the leaking line: unfreed allocations spread over most of the run (not a one-off burst)
    span = len(raw["device_traces"][0]) // 2
    leaking = max((s for s, v in sites.items() if v[3] - v[2] > span), key=lambda s: sites[s][0])
    report, _ = analyze(load_snapshot(path))
    leaks = [f for f in report.findings if f.code == "MEM001" and "device 0" in f.message]
    assert leaks and leaking in leaks[0].message
    per_step = sites[leaking][0] // sites[leaking][1]
    assert f"about {per_step / 2**20:.2f} MiB per step" in leaks[0].message


def test_oom_event_is_explained():
    path = SHARED / "cuda" / "multi_gpu_expandable_oom.pickle"
    if not path.exists():
        pytest.skip(f"{path} not found")
    raw = load_raw(path)
    oom = [(i, e) for d, t in enumerate(raw["device_traces"]) for i, e in enumerate(t)
           if e["action"] == "oom"]
    assert len(oom) == 1
    index, entry = oom[0]
    report, _ = analyze(load_snapshot(path))
    found = [f for f in report.findings if f.code == "MEM003"]
    assert len(found) == 1 and found[0].severity.value == "error"
    assert f"event {index}" in found[0].message
    assert f"asked {entry['size'] / 2**30:.2f} GiB" in found[0].message
    assert f"{entry['device_free'] / 2**20:.2f} MiB free on the device" in found[0].message


def test_fragmentation_in_the_non_expandable_npu_file():
    path = leak_demo("snapshot_with_empty_cache.pkl")
    report, contexts = analyze(load_snapshot(path))
    assert any(f.code == "MEM002" for f in report.findings)
    advice = [f for f in report.findings if f.code == "MEM007"]
    assert advice and "expandable_segments:True" in advice[0].message
    # each forced segment really had the bytes but not the piece, re-checked on the pool
    ctx = contexts[0]
    for event, request, _, free, largest, total in ctx.facts["forced_segments"]:
        pool = pool_at(ctx.snapshot, ctx.rep, event - 1)
        assert pool.free == total
        stream = int(ctx.rep.trace.stream[event])
        same = [s for s in pool.segments if s.stream == stream and not s.expandable
                and s.size > 2 << 20]
        assert sum(s.free for s in same) == free >= request > largest
    # the expandable run of the same script gets no fragmentation finding
    expandable, _ = analyze(load_snapshot(leak_demo("snapshot_with_empty_cache_expandable.pkl")))
    assert not any(f.code == "MEM002" for f in expandable.findings)

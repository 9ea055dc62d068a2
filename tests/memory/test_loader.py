"""The restricted loader: hostile pickles are refused, every variant normalises."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from npu_migrate.memory.loader import SnapshotError, load_snapshot, normalise
from npu_migrate.memory.replay import replay
from npu_migrate.memory.synthetic import as_legacy_list, training_snapshot


def test_global_opcode_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned"
    # protocol-0 GLOBAL (c) + REDUCE (R): would call os.system("touch <marker>")
    payload = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    path = tmp_path / "evil.pickle"
    path.write_bytes(payload)
    with pytest.raises(SnapshotError, match=r"refused to load class os\.system"):
        load_snapshot(path)
    assert not marker.exists()


def test_stack_global_in_protocol_5_is_refused(tmp_path, write_pickle):
    path = write_pickle({"segments": [], "device_traces": [], "x": subprocess.Popen}, protocol=5)
    with pytest.raises(SnapshotError, match="refused"):
        load_snapshot(path)


def test_protocol_5_snapshot_loads(write_pickle):
    data = training_snapshot(3000)
    data.pop("_facts")
    path = write_pickle(data, protocol=5)
    assert path.read_bytes()[:2] == b"\x80\x05"
    snap = load_snapshot(path)
    assert len(snap.traces[0]) == len(data["device_traces"][0])


@pytest.mark.parametrize("content, reason", [
    (b"", "truncated"),
    (b"\x80\x04\x95\x10\x00\x00", "truncated"),
    (b"not a pickle at all", "not a memory snapshot"),
])
def test_malformed_bytes(tmp_path, content, reason):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(SnapshotError, match=reason):
        load_snapshot(path)


@pytest.mark.parametrize("data", [42, {"device_traces": []}, {"segments": "x"},
                                  {"segments": [], "device_traces": [[{"size": 1}]]},
                                  {"segments": [{"address": 1}]}])
def test_non_snapshots_are_one_line_errors(write_pickle, data):
    path = write_pickle(data)
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_cli_exit_code_2_and_one_line(tmp_path):
    path = tmp_path / "cut.pickle"
    path.write_bytes(pickle.dumps(training_snapshot(500))[:1000])
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "memory", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and str(path) in result.stderr
    missing = subprocess.run([sys.executable, "-m", "npu_migrate", "memory",
                              str(tmp_path / "nope.pickle")], capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_old_cuda_list_with_history_blocks():
    data = training_snapshot(2000)
    snap = normalise(as_legacy_list(data), "legacy")
    assert snap.producer == "cuda-legacy" and not snap.traces
    live = [b for s in snap.segments for b in s.blocks if b["state"] == "active_allocated"]
    expected = [b for s in data["segments"] for b in s["blocks"]
                if b["state"] == "active_allocated"]
    assert len(live) == len(expected)
    assert all(b["stack"] >= 0 for b in live)  # frames recovered from `history`
    assert sum(b["requested_size"] for b in live) == sum(b["requested_size"] for b in expected)


def test_awaiting_free_spelling_is_pending():
    data = training_snapshot(2000, pending_at_end=True)
    for seg in data["segments"]:
        for block in seg["blocks"]:
            if block["state"] == "active_pending_free":
                block["state"] = "active_awaiting_free"
    snap = normalise(data)
    rep = replay(snap, 0)
    assert rep.final[1] - rep.final[0] == 3 << 20
    assert rep.active[-1] - rep.allocated[-1] == 3 << 20


def test_missing_device_defaults_to_zero():
    data = training_snapshot(1000)
    for seg in data["segments"]:
        seg.pop("device")
    assert {s.device for s in normalise(data).segments} == {0}


def test_unknown_line_written_as_unsigned_minus_one_is_line_zero():
    # Python 3.13 traces (kkaitlyn111/cs336-a2-systems memory_logs/memory_ctx128_forward.pickle)
    # carry line 2**64-1 for frames CPython has no line for; the file is a valid snapshot
    data = training_snapshot(1000)
    data.pop("_facts")
    event = data["device_traces"][0][0]
    event["frames"] = [{"name": "init_gpu_context", "filename": "fake_tensor.py",
                        "line": (1 << 64) - 1}] + list(event.get("frames") or [])
    snap = normalise(data)
    assert ("init_gpu_context", "fake_tensor.py", 0) in {f for s in snap.stacks for f in s}


def test_other_huge_lines_stay_malformed():
    data = training_snapshot(1000)
    data.pop("_facts")
    data["device_traces"][0][0]["frames"] = [{"name": "f", "filename": "a.py",
                                              "line": (1 << 64) - 2}]
    with pytest.raises(SnapshotError, match="frame line out of range"):
        normalise(data)

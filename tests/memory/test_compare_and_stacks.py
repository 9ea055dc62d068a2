"""Stack aggregation (flame, JSON at_peak), compare by allocation identity, msMemScope's
leak-compare example, consistency findings (MEM009) and typed option values."""

from __future__ import annotations

import copy
import json
import pickle
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.memory.compare import compare
from npu_migrate.memory.loader import load_snapshot, normalise
from npu_migrate.memory.scenarios import deep_model

from .conftest import REAL_FILES
from .msmemscope_example import FIXTURES, INPUT_BYTES, build
from .reference import load_raw
from .reference import replay as reference_replay

BASELINE, LEAKS = FIXTURES / "baseline.csv", FIXTURES / "leaks.csv"


def run(*args):
    return CliRunner().invoke(command, [str(a) for a in args])


def ok(*args):
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result.output


# ---- msMemScope's leak-compare example -------------------------------------------------

def test_fixtures_are_what_the_generator_writes(tmp_path):
    for made, committed in zip(build(tmp_path), (BASELINE, LEAKS)):
        assert made.read_text() == committed.read_text(), committed


def test_importer_keeps_operators_threads_and_allocation_ids():
    snap = load_snapshot(LEAKS)
    trace = snap.trace(0)
    inputs = np.flatnonzero((trace.action == 0) & (trace.size == INPUT_BYTES))
    assert len(inputs) == 2
    assert {snap.operators[o] for o in trace.operator[inputs]} == {"aten._to_copy.default"}
    assert {snap.stacks[s][0][0] for s in trace.stack[inputs]} == {"aten._to_copy.default"}
    threads = Counter(trace.thread[trace.action == 0].tolist())
    assert set(threads) == {3290097, 3291992} and threads[3291992] == 8  # the backward's
    assert sorted(trace.allocation_id[inputs].tolist()) == [14, 25]


def test_report_names_the_operator_not_no_stack():
    doc = json.loads(ok(LEAKS, "--format", "json"))
    device = doc["devices"][0]
    top = device["at_peak"]["top_stacks"]
    assert top[0]["site"] == "operator aten.mse_loss.default"
    assert {"aten._to_copy.default", "aten.addmm.default"} <= {t["operator"] for t in top}
    assert "<no stack recorded>" not in json.dumps(device["at_peak"])
    by_thread = {g["key"]: g["bytes"] for g in device["at_peak"]["by"]["thread"]}
    assert sum(by_thread.values()) == device["peak"]["bytes"]
    assert set(by_thread) == {"process 3290097 thread 3290097", "process 3290097 thread 3291992"}


def test_compare_finds_the_leak_at_its_operator():
    report, records = compare(load_snapshot(BASELINE), load_snapshot(LEAKS))
    leaks = [r for r in records if r["code"] == "MEM001"]
    assert len(leaks) == 1
    leak = leaks[0]
    assert leak["site"] == "operator aten._to_copy.default" and leak["bytes"] == 2 * INPUT_BYTES
    change = next(r for r in records if r["code"] == "MEM004")
    assert "left unfreed at the end 3.00 KiB -> 7.63 MiB" in change["message"]
    assert [r["code"] for r in records] == ["MEM001", "MEM004"]  # warnings first
    assert "compared with the baseline" in leak["evidence"]
    end = next(t for t in report.tables if t.title.startswith("Left unfreed"))
    assert [row[1] for row in end.rows] == ["operator aten._to_copy.default"]
    # the same run against itself, or the baseline against the leak version: no leak
    for a, b in ((LEAKS, LEAKS), (LEAKS, BASELINE)):
        _, records = compare(load_snapshot(a), load_snapshot(b))
        assert not [r for r in records if r["code"] == "MEM001"]


def test_compare_cli_json_carries_the_finding():
    doc = json.loads(ok("compare", BASELINE, LEAKS, "--format", "json"))
    leak = next(f for f in doc["findings"] if f["code"] == "MEM001")
    assert leak["operator"] == "aten._to_copy.default" and leak["device"] == 0
    assert len(leak["blocks"]) == 2


# ---- compare by allocation identity: its kind in snapshot pickles ----------------------

def moved(data, line_from, line_to):
    """The same run with one line of train.py moved (an edit above it)."""
    out = copy.deepcopy(data)
    for entry in out["device_traces"][0]:
        for frame in entry.get("frames", []):
            if frame["filename"].endswith("train.py") and frame["line"] == line_from:
                frame["line"] = line_to
    for seg in out["segments"]:
        for block in seg["blocks"]:
            for frame in block.get("frames", []):
                if frame["filename"].endswith("train.py") and frame["line"] == line_from:
                    frame["line"] = line_to
    return out


def test_a_tensor_moving_between_lines_is_not_plus_and_minus():
    data = deep_model(8, 6)
    data.pop("_facts")
    edited = moved(data, 46, 51)  # the optimizer line moved down five lines
    report, _ = compare(normalise(data, "a"), normalise(edited, "b"))
    for table in report.tables[1:3]:
        assert all(row[4] == 0 for row in table.rows), table.rows
    # and a real change is still seen, at its identity
    bigger = deep_model(8, 6, leak_bytes=1 << 20)
    bigger.pop("_facts")
    report, records = compare(normalise(data, "a"), normalise(bigger, "b"))
    leak = next(r for r in records if r["code"] == "MEM001")
    assert leak["site"] == "train.py:48 (train_step)"


def test_identity_keeps_two_allocations_of_one_line_apart_by_stack():
    data = deep_model(8, 6)
    data.pop("_facts")
    report, _ = compare(normalise(data, "a"), normalise(data, "b"))
    assert not any(f.code == "MEM001" for f in report.findings)
    assert all(row[4] == 0 for row in report.tables[1].rows)


# ---- stack aggregation -----------------------------------------------------------------

@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    data = deep_model(12, 6, leak_bytes=1 << 20)
    data.pop("_facts")
    path = tmp_path_factory.mktemp("flame") / "loop.pickle"
    path.write_bytes(pickle.dumps(data))
    return path


def test_top_stacks_at_the_peak_add_up_to_the_oracle(loop):
    doc = json.loads(ok(loop, "--format", "json"))
    ref = reference_replay(load_raw(loop), 0)
    at_peak = doc["devices"][0]["at_peak"]
    assert at_peak["bytes"] == ref["peak"] and at_peak["event"] == ref["peak_index"]
    # the oracle's live set at the peak, grouped by the full stack of each block's alloc
    frames_of = {}
    for entry in load_raw(loop)["device_traces"][0][:ref["peak_index"] + 1]:
        if entry["action"] == "alloc":
            frames_of[entry["addr"]] = entry.get("frames", [])
    by_stack = Counter()
    for addr, size in ref["peak_live"].items():
        frames = frames_of.get(addr)
        if frames is not None:
            by_stack[tuple(f"{f['filename']}:{f['line']} {f['name']}"
                           for f in reversed(frames))] += size
    for entry in at_peak["top_stacks"][:5]:
        assert by_stack[tuple(entry["frames"])] == entry["bytes"], entry["site"]
    assert at_peak["top_stacks"][0]["frames"][-1].startswith("/usr/lib/python3.11/")


def test_flame_command_tree_and_folded(loop, tmp_path):
    ref = reference_replay(load_raw(loop), 0)
    doc = json.loads(ok("flame", loop, "--format", "json"))
    tree = doc["flames"][0]["tree"]
    assert tree["bytes"] == ref["peak"] and doc["flames"][0]["event"] == ref["peak_index"]
    assert sum(c["bytes"] for c in tree["children"]) == tree["bytes"]
    event = ref["peak_index"] // 2
    folded = ok("flame", loop, "--event", event, "--folded", "--min-share", "0").splitlines()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in folded)
    assert total == ref["allocated"][event]
    assert all(line.startswith("device0;all;") for line in folded)
    text = ok("flame", loop, "--by", "stream")
    assert "0x5a5a0000" in text


def _cuda_snapshot(name_part: str):
    """A real CUDA snapshot of ../shared (not shipped: no stated licence), or a skip."""
    found = next((p for p in REAL_FILES if p.parent.name == "cuda" and name_part in p.name), None)
    if found is None:
        pytest.skip(f"the real CUDA snapshot *{name_part}* is only in ../shared")
    return found


def test_real_cuda_peak_is_no_longer_unknown():
    """On the 3-GPU run most of the peak was `other`; by stack it has names."""
    path = _cuda_snapshot("multi_gpu")
    doc = json.loads(ok(path, "--format", "json"))
    for device in doc["devices"]:
        top = device["at_peak"]["top_stacks"]
        named = sum(t["bytes"] for t in top if t["site"] != "<no stack recorded>")
        assert named >= 0.5 * device["at_peak"]["bytes"]


# ---- consistency (MEM009) --------------------------------------------------------------

def test_allocated_above_reserved_is_flagged(tmp_path):
    from .test_msmemscope import write_csv

    rows = [[1, "MALLOC", "PTA", "N/A", 1000, 7, 7, 0, "0x1000",
             "{allocation_id:1,addr:0x1000,size:3145728,total:2097152,used:3145728}", "", ""],
            [2, "FREE", "PTA", "N/A", 2000, 7, 7, 0, "0x1000",
             "{allocation_id:1,addr:0x1000,size:-3145728,total:2097152,used:0}", "", ""]]
    doc = json.loads(ok(write_csv(tmp_path / "memscope_dump_1.csv", rows), "--format", "json"))
    found = [f for f in doc["findings"] if f["code"] == "MEM009"]
    assert len(found) == 1 and "3.00 MiB allocated with 2.00 MiB reserved" in found[0]["message"]


def test_cuda_snapshot_with_torch_npu_shape_is_read_as_cuda(write_pickle):
    path = _cuda_snapshot("small_training_step.pickle")
    data = load_raw(path)
    for entry in data["device_traces"][0]:
        entry.pop("time_us", None)
    data.pop("allocator_settings", None)
    doc = json.loads(ok(write_pickle(data), "--format", "json"))
    assert doc["summary"]["producer"] == "cuda"
    found = [f for f in doc["findings"] if f["code"] == "MEM009"]
    assert len(found) == 1 and "labelled torch_npu" in found[0]["message"]
    assert "CUDACachingAllocator" in found[0]["message"] or "c10::cuda" in found[0]["message"]
    clean = json.loads(ok(path, "--format", "json"))
    assert not [f for f in clean["findings"] if f["code"] == "MEM009"]


# ---- typed options ---------------------------------------------------------------------

@pytest.mark.parametrize("args,words", [
    (["events", "{f}", "--action", "allocc"], ["--action", "allocc"]),
    (["events", "{f}", "--limit", "-3"], ["--limit"]),
    (["events", "{f}", "--start", "-1"], ["--start"]),
    (["blocks", "{f}", "--since", "nan"], ["--since"]),
    (["report", "{f}", "--device", "7"], ["--device 7", "device(s) 0"]),
    (["report", "{f}", "--lazy", "150%"], ["--lazy"]),
    (["report", "{f}", "--idle", "soon"], ["--idle"]),
    (["flame", "{f}", "--by", "colour"], ["--by"]),
    (["flame", "{f}", "--event", "999999"], ["--event 999999"]),
])
def test_bad_option_values_are_one_line(loop, args, words):
    result = run(*[a.replace("{f}", str(loop)) for a in args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("npu-migrate memory: error:"), result.output
    assert all(w in lines[0] for w in words), lines[0]


def test_thresholds_change_the_msmemscope_flags(tmp_path):
    from .test_msmemscope import rows, write_csv

    path = write_csv(tmp_path / "memscope_dump_1.csv", rows())
    default = json.loads(ok(path, "--format", "json"))
    strict = json.loads(ok(path, "--format", "json", "--lazy", "99%", "--delayed", "99%",
                           "--idle", "99%"))
    timed = json.loads(ok(path, "--format", "json", "--lazy", "1us", "--delayed", "1us",
                          "--idle", "1us"))

    def count(doc):
        return sum(len(f.get("blocks", [])) for f in doc["findings"] if f["code"] == "MEM005")
    assert count(strict) < count(default) <= count(timed)
    kinds = next(f for f in default["findings"] if f["code"] == "MEM005")["kinds"]
    assert set(kinds) <= {"lazy_used", "delayed_free", "long_idle"}

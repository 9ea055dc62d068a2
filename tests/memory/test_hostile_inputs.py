"""Hostile and malformed inputs: each gives one line on stderr naming the file and exit 2
(or, for odd but valid input, a normal report); never a traceback, never a hang."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command

EVENT = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1,
         "frames": [{"name": "f", "filename": "train.py", "line": 3}]}
SEGMENT = {"device": 0, "address": 4096, "total_size": 2 << 20, "stream": 0,
           "segment_type": "large", "blocks": [{"address": 4096, "size": 512,
                                                 "requested_size": 512,
                                                 "state": "active_allocated", "frames": []},
                                                {"address": 4608, "size": (2 << 20) - 512,
                                                 "requested_size": 0, "state": "inactive",
                                                 "frames": []}]}


def snapshot(segment=None, event=None, **extra):
    data = {"segments": [dict(SEGMENT, **(segment or {}))],
            "device_traces": [[dict(EVENT, **(event or {}))]]}
    data.update(extra)
    return data


DEEP = "<deep list here>"


def with_deep_list(data, depth: int = 200_000) -> bytes:
    """Pickle `data` with the DEEP marker replaced by a list nested `depth` levels (pickle
    itself recurses on such objects, so the opcodes are written by hand: EMPTY_LIST x depth,
    then APPEND x depth-1)."""
    marker = DEEP.encode()
    raw = pickle.dumps(data, protocol=2)
    opcode = b"X" + len(marker).to_bytes(4, "little") + marker
    assert raw.count(opcode) == 1
    return raw.replace(opcode, b"]" * depth + b"a" * (depth - 1))


def memo_bomb_traces() -> bytes:
    """~2 MB on disk, 128 devices x 1M events once the memo references are followed."""
    trace = [EVENT] * 1_000_000
    return pickle.dumps({"segments": [], "device_traces": [trace] * 128}, protocol=4)


def memo_bomb_blocks() -> bytes:
    blocks = [SEGMENT["blocks"][0]] * 1_000_000
    segments = [dict(SEGMENT, blocks=blocks) for _ in range(64)]
    return pickle.dumps({"segments": segments, "device_traces": []}, protocol=4)


def bad_pickles() -> list[tuple[str, bytes]]:
    rng = random.Random(1234)
    good = pickle.dumps(snapshot(), protocol=4)
    cases = [("empty", b""), ("text", b"hello, not a pickle\n"),
             ("class_global", b"cos\nsystem\n(S'echo hi'\ntR.")]
    cases += [(f"random_{i}", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
              for i in range(6)]
    cases += [(f"truncated_{n}", good[:n]) for n in (1, 10, len(good) // 2, len(good) - 1)]
    plain = {
        "int": 42, "string": "segments", "none": None, "list_of_ints": [1, 2, 3],
        "dict_without_segments": {"device_traces": []},
        "segments_not_list": {"segments": 5},
        "traces_not_list": {"segments": [], "device_traces": 7},
        "traces_of_ints": {"segments": [], "device_traces": [1, 2]},
        "segment_no_address": {"segments": [{"total_size": 1}], "device_traces": []},
        "segment_size_inf": snapshot({"total_size": float("inf")}),
        "segment_size_2_80": snapshot({"total_size": 2 ** 80}),
        "segment_size_negative": snapshot({"total_size": -5}),
        "segment_address_text": snapshot({"address": "0x1000"}),
        "segment_address_nan": snapshot({"address": float("nan")}),
        "segment_address_2_80": snapshot({"address": 2 ** 80}),
        "device_huge": snapshot({"device": 2 ** 40}),
        "block_size_inf": snapshot({"blocks": [{"size": float("inf"), "state": "inactive"}]}),
        "block_size_2_80": snapshot({"blocks": [{"size": 2 ** 80, "state": "inactive"}]}),
        "block_requested_negative": snapshot({"blocks": [{"size": 1, "requested_size": -1}]}),
        "event_size_inf": snapshot(event={"size": float("inf")}),
        "event_size_nan": snapshot(event={"size": float("nan")}),
        "event_size_2_80": snapshot(event={"size": 2 ** 80}),
        "event_size_negative": snapshot(event={"size": -512}),
        "event_addr_2_80": snapshot(event={"addr": 2 ** 80}),
        "event_addr_negative": snapshot(event={"addr": -1}),
        "event_time_inf": snapshot(event={"time_us": float("inf")}),
        "event_time_2_70": snapshot(event={"time_us": 2 ** 70}),
        "event_action_list": snapshot(event={"action": []}),
        "event_not_dict": {"segments": [], "device_traces": [[7]]},
        "frames_not_list": snapshot(event={"frames": 5}),
        "frame_line_inf": snapshot(event={"frames": [
            {"name": "f", "filename": "a.py", "line": float("inf")}]}),
        "annotations_not_list": snapshot(external_annotations=5),
        "annotations_garbage": snapshot(external_annotations=[1, "x"]),
        "annotation_time_text": snapshot(external_annotations=[
            {"name": "ProfilerStep#1", "stage": "START", "time_us": "12"}]),
        "unknown_state_type": snapshot({"blocks": [{"size": 512, "state": ["?"]}]}),
        "unknown_state_name": snapshot({"blocks": [{"size": 512, "state": "allocated"}]}),
        "allocator_settings_list": snapshot(allocator_settings=[1]),
        "segment_type_number": snapshot({"segment_type": 7}),
        "expandable_text": snapshot({"is_expandable": "yes"}),
        "pool_id_text": snapshot({"segment_pool_id": "0,0"}),
    }
    # typed fields: a number given as text is refused (numpy would read '512' as 512)
    plain.update({
        "event_size_text": snapshot(event={"size": "512"}),
        "event_addr_text": snapshot(event={"addr": "4096"}),
        "event_stream_text": snapshot(event={"stream": "0"}),
        "event_time_text": snapshot(event={"time_us": "1"}),
        "event_size_float": snapshot(event={"size": 512.0}),
        "event_size_bool": snapshot(event={"size": True}),
        "event_action_number": snapshot(event={"action": 5}),
        "event_no_size": {"segments": [SEGMENT], "device_traces": [[
            {k: v for k, v in EVENT.items() if k != "size"}]]},
        "block_size_text": snapshot({"blocks": [{"size": "512", "state": "inactive"}]}),
        "segment_size_text": snapshot({"total_size": "2097152"}),
        "frame_line_text": snapshot(event={"frames": [
            {"name": "f", "filename": "a.py", "line": "3"}]}),
        "frame_not_dict": snapshot(event={"frames": ["a.py:3"]}),
    })
    for name, data in plain.items():
        cases.append((name, pickle.dumps(data, protocol=4)))
    cases += [
        ("frame_name_200000_deep", with_deep_list(snapshot(event={"frames": [
            {"name": DEEP, "filename": "a.py", "line": 1}]}))),
        ("top_level_200000_deep", with_deep_list(DEEP)),
        ("segment_200000_deep", with_deep_list({"segments": [DEEP], "device_traces": []})),
        ("event_200000_deep", with_deep_list({"segments": [], "device_traces": [[DEEP]]})),
    ]
    cases += [("memo_bomb_traces", memo_bomb_traces()), ("memo_bomb_blocks", memo_bomb_blocks())]
    return cases


def odd_but_valid() -> list[tuple[str, bytes]]:
    """Inputs that are strange but analysable: the report runs and exits 0."""
    frames = [{"name": f"f{i}", "filename": "a.py", "line": i} for i in range(200_000)]
    data = {
        "stack_200000_frames": snapshot(event={"frames": frames}),
        "frame_name_10mb": snapshot(event={"frames": [
            {"name": "x" * 10_000_000, "filename": "a.py", "line": 1}]}),
        "annotations_absent_fields": snapshot(external_annotations=[{"name": "x"}]),
        "unknown_action": snapshot(event={"action": "prefetch"}),
        "no_traces": {"segments": [SEGMENT]},
        "legacy_list": [SEGMENT],
    }
    out = [(name, pickle.dumps(value, protocol=4)) for name, value in data.items()]
    out += [(f"protocol_{p}", pickle.dumps(snapshot(), protocol=p)) for p in range(6)]
    return out


BAD_CSV = {
    "csv_missing_columns": "ID,Event\n1,MALLOC\n",
    "csv_ptr_inf": "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,"
                   "Attr\n1,MALLOC,PTA,N/A,10,1,1,0,inf,{size:512}\n",
    "csv_size_1e400": "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,"
                      "Attr\n1,MALLOC,PTA,N/A,10,1,1,0,0x10,{size:1e400}\n",
    "csv_ptr_2_80": "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,"
                    f"Attr\n1,MALLOC,PTA,N/A,10,1,1,0,{2 ** 80},{{size:512}}\n",
    "csv_negative_time": "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,"
                         "Ptr,Attr\n1,MALLOC,PTA,N/A,-10,1,1,0,0x10,{size:512}\n",
}


def run(*args):
    return CliRunner().invoke(command, [str(a) for a in args])


def assert_one_line_error(result, path):
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("npu-migrate memory: error:"), result.output
    assert str(path) in lines[0] or Path(path).name in lines[0]


@pytest.mark.parametrize("name,payload", bad_pickles(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_bad_pickle_is_one_line_and_exit_2(tmp_path, name, payload):
    path = tmp_path / f"{name}.pickle"
    path.write_bytes(payload)
    assert_one_line_error(run(path), path)


@pytest.mark.parametrize("name,payload", odd_but_valid(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_odd_but_valid_input_is_reported(tmp_path, name, payload):
    path = tmp_path / f"{name}.pickle"
    path.write_bytes(payload)
    result = run(path, "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"schema_version"' in result.output


@pytest.mark.parametrize("name", sorted(BAD_CSV))
def test_bad_msmemscope_export(tmp_path, name):
    path = tmp_path / f"memscope_dump_{name}.csv"
    path.write_text(BAD_CSV[name])
    assert_one_line_error(run(path), path)


def test_not_utf8_csv_and_not_sqlite_db(tmp_path):
    csv = tmp_path / "memscope_dump_1.csv"
    csv.write_bytes(b"\xff\xfe\x00garbage")
    assert_one_line_error(run(csv), csv)
    db = tmp_path / "memscope_dump_1.db"
    db.write_bytes(b"not sqlite at all" * 10)
    assert_one_line_error(run(db), db)


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.pickle"
    path.write_bytes(pickle.dumps(snapshot(), protocol=4))
    return path


@pytest.mark.parametrize("option", ["--html", "-o"])
def test_unwritable_outputs(good, tmp_path, option):
    for target in (tmp_path / "missing" / "r.html", tmp_path):
        assert_one_line_error(run(good, option, target), target)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if not (locked / "x").parent.stat().st_mode & 0o200:  # root ignores the mode
        result = run(good, option, locked / "r.html")
        if result.exit_code != 0:
            assert_one_line_error(result, locked / "r.html")


def test_bad_regex_and_event_out_of_range(good):
    result = run(good, "--step-frame", "(unclosed")
    assert result.exit_code == 2 and "--step-frame" in result.output
    result = run("pool", good, "--event", "99")
    assert result.exit_code == 2 and str(good) in result.output


def test_memo_bomb_is_refused_in_bounded_memory(tmp_path):
    """A child process limited to 1.5 GiB of address space must refuse the 4 MB bomb (a hang
    guard of 120 s, not a timing assertion)."""
    path = tmp_path / "bomb.pickle"
    path.write_bytes(memo_bomb_traces())
    assert path.stat().st_size < 4 << 20
    script = ("import resource,sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29));"
              "from npu_migrate.commands.memory import command;"
              "command.main(['report', sys.argv[1]], standalone_mode=True)")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "memo references" in done.stderr and "Traceback" not in done.stderr


def test_suite_has_enough_inputs():
    count = len(bad_pickles()) + len(odd_but_valid()) + len(BAD_CSV) + 2 + 4 + 2
    assert count >= 50


@pytest.mark.parametrize("view", ["events", "blocks"])
def test_unwritable_export_is_one_line(good, tmp_path, view):
    target = tmp_path / "missing" / "rows.csv"
    assert_one_line_error(run(view, good, "--export", target), target)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("suffix", [".pickle", ".csv", ".db"])
def test_a_fifo_or_a_device_is_refused_without_reading(tmp_path, suffix):
    """A FIFO (a blocking open waits for a writer forever) and a link to /dev/zero (never ends):
    one line, exit 2, at once. Run in a child with a timeout, so a regression fails instead of
    hanging the suite."""
    import os

    fifo = tmp_path / f"memscope_dump_fifo{suffix}"
    os.mkfifo(fifo)
    zero = tmp_path / f"memscope_dump_zero{suffix}"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        done = subprocess.run([sys.executable, "-m", "npu_migrate", "memory", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and path.name in lines[0] and "not a regular file" in lines[0], done.stderr

"""The command line: default report, formats, event/block views with filters and exports,
pool state, compare."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.memory.synthetic import training_snapshot

from .reference import load_raw
from .reference import replay as reference_replay


def make(write_pickle, name="a.pickle", **kwargs):
    data = training_snapshot(**{"target_events": 5000, "layers": 4, **kwargs})
    data.pop("_facts")
    return write_pickle(data, name)


def run(*args):
    result = CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)
    return result


def test_default_subcommand_is_report_json(write_pickle):
    path = make(write_pickle)
    result = run(path, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    ref = reference_replay(load_raw(path), 0)
    assert data["summary"]["events"] == len(ref["allocated"])
    codes = {f["code"] for f in data["findings"]}
    assert {"MEM001", "MEM004"} <= codes
    assert all(f["path"] == str(path) and f["line"] == 0 for f in data["findings"])
    devices = next(t for t in data["tables"] if t["title"] == "Devices")
    assert devices["rows"][0][1] == len(ref["allocated"])


def test_markdown_and_output_file(write_pickle, tmp_path):
    path = make(write_pickle)
    out = tmp_path / "r.md"
    assert run("report", path, "--format", "markdown", "-o", out).exit_code == 0
    text = out.read_text()
    assert text.startswith("# Memory snapshot analysis") and "### Findings" in text


def test_event_view_filters_and_csv(write_pickle, tmp_path):
    path = make(write_pickle)
    raw = load_raw(path)["device_traces"][0]
    out = tmp_path / "ev.csv"
    result = run("events", path, "--min-size", "1M", "--start", "100", "--end", "2000",
                 "--action", "alloc", "--export", out, "--limit", "3")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    expected = [i for i in range(100, 2001) if raw[i]["action"] == "alloc"
                and raw[i]["size"] >= 1 << 20]
    assert [int(r["id"]) for r in rows] == expected
    ref = reference_replay(load_raw(path), 0)
    assert all(int(r["allocated"]) == ref["allocated"][int(r["id"])] for r in rows)
    assert "train.py" in rows[0]["call_stack"]


def test_block_view_json_export(write_pickle, tmp_path):
    path = make(write_pickle, pending_at_end=True)
    out = tmp_path / "blocks.json"
    result = run("blocks", path, "--state", "active_pending_free", "--export", out)
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    assert len(rows) == 1 and rows[0]["size"] == 3 << 20 and rows[0]["free_event"] == -1
    assert rows[0]["free_requested_event"] >= rows[0]["alloc_event"] >= 0


def test_time_range_filter(write_pickle, tmp_path):
    path = make(write_pickle)
    raw = load_raw(path)["device_traces"][0]
    t0 = raw[0]["time_us"]
    out = tmp_path / "t.json"
    assert run("events", path, "--since", "0.01", "--until", "0.02", "--export", out).exit_code == 0
    ids = [r["id"] for r in json.loads(out.read_text())]
    expected = [i for i, e in enumerate(raw) if 0.01 <= (e["time_us"] - t0) / 1e6 <= 0.02]
    assert ids == expected


def test_pool_command(write_pickle):
    path = make(write_pickle)
    result = run("pool", path, "--event", "50", "--format", "json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)["tables"][0]
    types = {c["name"]: c["type"] for c in table["columns"]}
    assert types["size"] == "bytes" and types["block id"] == "integer"
    assert types["address"] == "string" and types["free"] == "bytes"
    segments = [row for row in table["rows"] if row[0] == "segment"]
    blocks = [row for row in table["rows"] if row[0] == "block"]
    assert segments and blocks
    assert all(isinstance(r[2], int) and r[4] is None and isinstance(r[6], int) for r in segments)
    assert all(isinstance(r[2], int) and isinstance(r[4], int) and r[6] is None for r in blocks)
    assert run("pool", path, "--event", "999999").exit_code == 2


def test_compare(write_pickle):
    small = make(write_pickle, "small.pickle", seq_lengths=(100,))
    big = make(write_pickle, "big.pickle", seq_lengths=(3000,))
    result = run("compare", small, big, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    peaks = data["tables"][0]["rows"][0]
    ref_a = reference_replay(load_raw(small), 0)["peak"]
    ref_b = reference_replay(load_raw(big), 0)["peak"]
    assert peaks[1] == ref_a and peaks[2] == ref_b and peaks[3] == ref_b - ref_a
    sites = data["tables"][1]["rows"]
    assert sites[0][1] in ("train.py:41 (train_step)", "train.py:44 (train_step)")
    categories = {row[1]: row for row in data["tables"][3]["rows"]}
    assert categories["activation"][4] > 0 and categories["parameter"][4] == 0


def test_bad_size_is_usage_error(write_pickle):
    path = make(write_pickle)
    result = run("events", path, "--min-size", "lots")
    assert result.exit_code == 2


def test_step_frame_option(write_pickle):
    path = make(write_pickle)
    raw = load_raw(path)["device_traces"][0]
    leaks = [e for e in raw if e["action"] == "alloc" and e["frames"][0]["line"] == 48]
    result = run(path, "--step-frame", r"train\.py:48 ", "--format", "json")
    assert result.exit_code == 0, result.output
    devices = next(t for t in json.loads(result.output)["tables"] if t["title"] == "Devices")
    assert devices["rows"][0][3] == len(leaks)

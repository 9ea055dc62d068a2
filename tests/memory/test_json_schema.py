"""Every memory subcommand's --format json validates against the published schema, with typed
cells (numbers, not '3.03 GiB'), and -o writes the same document to a file."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.memory.scenarios import deep_model

from .conftest import REAL_FILES
from .reference import load_raw
from .reference import replay as reference_replay

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas"
                     / "memory-report.schema.json").read_text())
UNIT_TEXT = re.compile(r"^-?\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)$")


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    data = deep_model(16, 6, leak_bytes=1 << 20, emulation=True)
    data.pop("_facts")
    path = tmp_path_factory.mktemp("schema") / "loop.pickle"
    path.write_bytes(pickle.dumps(data))
    return path


def run(*args):
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def check(doc, kind):
    jsonschema.validate(doc, SCHEMA)
    assert doc["kind"] == kind
    for table in doc["tables"]:
        for index, column in enumerate(table["columns"]):
            cells = [row[index] for row in table["rows"] if row[index] is not None]
            if column["type"] in ("bytes", "integer"):
                assert all(type(c) is int for c in cells), (table["title"], column)
            if column["type"] == "string":
                assert not any(UNIT_TEXT.match(c) for c in cells), (table["title"], column)
    return doc


SUBCOMMANDS = {
    "report": lambda p: ["report", p],
    "events": lambda p: ["events", p, "--limit", "20"],
    "blocks": lambda p: ["blocks", p, "--limit", "20"],
    "pool": lambda p: ["pool", p, "--event", "100"],
    "flame": lambda p: ["flame", p, "--by", "stream"],
    "compare": lambda p: ["compare", p, p],
}


@pytest.mark.parametrize("kind", sorted(SUBCOMMANDS))
def test_every_subcommand_json_is_valid_and_typed(snap, tmp_path, kind):
    args = SUBCOMMANDS[kind](snap)
    doc = check(json.loads(run(*args, "--format", "json").output), kind)
    out = tmp_path / f"{kind}.json"
    run(*args, "--format", "json", "-o", out)
    assert json.loads(out.read_text()) == doc


def test_report_numbers_match_the_reference(snap):
    doc = check(json.loads(run(snap, "--format", "json").output), "report")
    ref = reference_replay(load_raw(snap), 0)
    device = doc["devices"][0]
    assert device["peak"]["bytes"] == ref["peak"] and device["peak"]["event"] == ref["peak_index"]
    assert isinstance(device["peak"]["time_s"], float)
    overview = next(t for t in doc["tables"] if t["title"] == "Devices")
    types = {c["name"]: c["type"] for c in overview["columns"]}
    assert types["peak allocated"] == "bytes" and types["peak time (s)"] == "number"
    assert overview["rows"][0][4] == ref["peak"]
    assert doc["counts"]["warning"] == sum(f["severity"] == "warning" for f in doc["findings"])


def test_pool_json_columns_are_separate(snap):
    doc = check(json.loads(run("pool", snap, "--event", "100", "--format", "json").output),
                "pool")
    names = [c["name"] for c in doc["tables"][0]["columns"]]
    assert names == ["kind", "address", "size", "state", "block id", "site", "free",
                     "largest free"]
    assert all(isinstance(v, int) for k, v in doc["summary"].items() if "reserved" in k)


@pytest.mark.skipif(not REAL_FILES, reason="real snapshots absent (../shared)")
@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name for p in REAL_FILES])
def test_real_snapshots_validate(path):
    check(json.loads(run(path, "--format", "json").output), "report")


def test_text_when_piped_is_plain_and_untruncated(snap):
    text = run(snap).output  # CliRunner is not a terminal
    assert "\x1b[" not in text and "…" not in text
    findings = [line for line in text.splitlines() if re.match(r".*:0:0: MEM\d{3} ", line)]
    doc = json.loads(run(snap, "--format", "json").output)
    assert len(findings) == len(doc["findings"])
    for line, finding in zip(findings, doc["findings"]):
        assert finding["message"] in line  # whole message on one line
    counts = doc["counts"]
    assert text.rstrip().splitlines()[-1] == (
        f"{len(doc['findings'])} findings: {counts['error']} error, {counts['warning']} "
        f"warning, {counts['info']} info")


def test_msmemscope_report_and_compare_validate():
    from .msmemscope_example import FIXTURES

    report = check(json.loads(run(FIXTURES / "leaks.csv", "--format", "json").output), "report")
    assert {"operator", "thread"} <= set(report["devices"][0]["at_peak"]["by"])
    doc = check(json.loads(run("compare", FIXTURES / "baseline.csv", FIXTURES / "leaks.csv",
                               "--format", "json").output), "compare")
    assert [f["code"] for f in doc["findings"]] == ["MEM001", "MEM004"]

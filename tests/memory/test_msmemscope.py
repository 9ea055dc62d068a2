"""msMemScope CSV/DB exports imported into the same model."""

from __future__ import annotations

import csv
import sqlite3

import pytest

from npu_migrate.memory.loader import SnapshotError, load_snapshot
from npu_migrate.memory.replay import replay
from npu_migrate.memory.report import analyze

HEADER = ["ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id", "Thread Id",
          "Device Id", "Ptr", "Attr", "Call Stack(Python)", "Call Stack(C)"]
MiB = 1 << 20


def rows():
    """A pool that grows to 64 MiB; block A (8 MiB) is accessed only at the very start of a
    long life (delayed free); block B (4 MiB) is accessed late (lazy use); C leaks."""
    out, t = [], 1_000_000
    stack = "/home/u/train.py(12): step;/home/u/train.py(30): main"

    def add(event, kind, ptr, attr, name="N/A"):
        nonlocal t
        t += 1000
        out.append([len(out), event, kind, name, t, 7, 7, 0, hex(ptr), attr, stack, ""])

    add("MALLOC", "HAL", 0x9000, "{addr:0x9000,size:67108864,page_type:huge}")
    add("MALLOC", "PTA", 0x1000, f"{{allocation_id:1,addr:0x1000,size:{8 * MiB},owner:PTA,total:{64 * MiB},used:{8 * MiB}}}")
    add("ACCESS", "WRITE", 0x1000, "{dtype:float,shape:[2],size:8,format:ND,type:PTA,allocation_id:1}", "aten::add")
    add("MALLOC", "PTA", 0x2000, f"{{allocation_id:2,addr:0x2000,size:{4 * MiB},total:{64 * MiB},used:{12 * MiB}}}")
    for i in range(20):
        add("OP_LAUNCH", "ATEN_START", 0, "{}", f"aten::op{i}")
    add("ACCESS", "READ", 0x2000, "{type:PTA,allocation_id:2}", "aten::mul")
    add("FREE", "PTA", 0x2000, f"{{allocation_id:2,addr:0x2000,size:{4 * MiB},total:{64 * MiB},used:{8 * MiB}}}")
    add("MALLOC", "PTA", 0x3000, f"{{allocation_id:3,addr:0x3000,size:{2 * MiB},total:{64 * MiB},used:{10 * MiB}}}")
    add("FREE", "PTA", 0x1000, f"{{allocation_id:1,addr:0x1000,size:{8 * MiB},total:{64 * MiB},used:{2 * MiB}}}")
    add("MALLOC", "HOST", 0x5000, "{addr:0x5000,size:100}")
    out.append([len(out), "MALLOC", "PTA", "N/A", t + 5, 7, 7, "cpu", "0x6000", "{size:5}", "", ""])
    return out


def write_csv(path, data):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(data)
    return path


def write_db(path, data, table="memscope_dump"):
    conn = sqlite3.connect(path)
    conn.execute(f'CREATE TABLE {table} ({", ".join(f"[{c}] TEXT" for c in HEADER)})')
    conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(HEADER))})",
                     [[str(v) for v in r] for r in data])
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("kind", ["csv", "db", "leaks_dump"])
def test_import_replays_pool_totals(tmp_path, kind):
    if kind == "csv":
        path = write_csv(tmp_path / "memscope_dump_1.csv", rows())
    else:
        table = "leaks_dump" if kind == "leaks_dump" else "memscope_dump"
        path = write_db(tmp_path / "memscope_dump_1.db", rows(), table)
    snap = load_snapshot(path)
    assert snap.producer == "msmemscope" and snap.devices == [0]
    rep = replay(snap, 0)
    assert rep.initial == (0, 0, 0)
    assert rep.allocated.max() == 12 * MiB and rep.allocated[-1] == 2 * MiB
    assert rep.reserved.max() == 64 * MiB
    assert snap.stacks[rep.trace.stack[rep.blocks.alloc[0]]][0] == ("step", "/home/u/train.py", 12)


def test_access_events_flag_inefficient_blocks(tmp_path):
    report, _ = analyze(load_snapshot(write_csv(tmp_path / "d.csv", rows())))
    found = [f for f in report.findings if f.code == "MEM005"]
    assert found and "lazy_used 1" in found[0].message and "delayed_free 1" in found[0].message


def test_bad_exports(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(SnapshotError, match="missing columns"):
        load_snapshot(bad)
    empty_db = tmp_path / "x.db"
    sqlite3.connect(empty_db).close()
    with pytest.raises(SnapshotError, match="no table"):
        load_snapshot(empty_db)
    with pytest.raises(SnapshotError):
        load_snapshot(tmp_path / "absent.db")

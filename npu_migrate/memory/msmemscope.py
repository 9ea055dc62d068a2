"""Import msMemScope `memscope_dump_*.csv` / `.db` exports into the snapshot model.

Columns (msMemScope docs/output_file_spec.md): ID, Event, Event Type, Name, Timestamp(ns),
Process Id, Thread Id, Device Id, Ptr, Attr, and optionally Call Stack(Python), Call Stack(C).
Attr is a `{key:value,...}` map. Mapping:

* MALLOC/FREE of a caching pool (PTA, ATB, MindSpore, PTA_WORKSPACE) -> alloc, and
  free_requested + free_completed; the pool's `total` attribute drives `reserved` through a
  pseudo expandable segment (the rows carry no segment layout, so the pool view shows totals
  but not addresses inside segments).
* HAL MALLOC/FREE (driver memory) -> segment_alloc / segment_free when no pool totals exist.
* ACCESS rows -> first/last access and the longest idle gap per block, for MEM005.
"""

from __future__ import annotations

import csv
import itertools
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from npu_migrate.memory.limits import MAX_EVENTS, SnapshotError
from npu_migrate.memory.model import (
    ACTIVE,
    ALLOC,
    FREE_DONE,
    FREE_REQ,
    SEG_ALLOC,
    SEG_FREE,
    SEG_MAP,
    SEG_UNMAP,
    DeviceTrace,
    Segment,
    Snapshot,
)

REQUIRED = ("ID", "Event", "Event Type", "Timestamp(ns)", "Device Id", "Ptr", "Attr")
POOL_TYPES = {"PTA", "ATB", "MINDSPORE", "PTA_WORKSPACE"}
TABLES = ("memscope_dump", "leaks_dump")
PSEUDO_BASE = 1 << 60  # where the pseudo segment that carries pool totals lives
OWNER_FILE = "<owner>"  # pseudo frame file: the site is the msMemScope owner label
MAX_FRAMES = 1024
FRAME_RE = re.compile(r"^\s*(?P<file>[^()]+?)\((?P<line>\d+)\)\s*:?\s*(?P<name>.*)$")


def load_msmemscope(path: str | Path) -> Snapshot:
    path = Path(path)
    try:
        reader = _read_db(path) if path.suffix == ".db" else _read_csv(path)
        rows = list(itertools.islice(reader, MAX_EVENTS + 1))
        if len(rows) > MAX_EVENTS:
            raise SnapshotError(f"{path}: refused: more than {MAX_EVENTS} rows")
    except (OSError, sqlite3.Error, csv.Error, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: not an msMemScope export: {exc}") from None
    except ValueError as exc:
        raise SnapshotError(f"{path}: not an msMemScope export: {exc}") from None
    try:
        return _build(str(path), rows)
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        raise SnapshotError(f"{path}: malformed msMemScope row ({exc})") from None


def _read_csv(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"missing columns {missing}")
        yield from reader


def _read_db(path: Path) -> Iterable[dict[str, Any]]:
    if not path.is_file():
        raise OSError(f"cannot read {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        table = next((t for t in TABLES if t in names), None)
        if table is None:
            raise ValueError(f"no table named {' or '.join(TABLES)}")
        cursor = conn.execute(f'SELECT * FROM "{table}"')  # name from the fixed list above
        columns = [d[0] for d in cursor.description]
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise ValueError(f"missing columns {missing}")
        for row in cursor:
            yield {c: ("" if v is None else str(v)) for c, v in zip(columns, row)}
    finally:
        conn.close()


def parse_attr(text: str) -> dict[str, str]:
    """`{allocation_id:3,addr:0x12,size:512,owner:PTA@model}` -> dict of strings."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out = {}
    for pair in body.split(","):
        key, sep, value = pair.partition(":")
        if sep:
            out[key.strip().strip('"')] = value.strip().strip('"')
    return out


MAX_VALUE = (1 << 62) - 1  # addresses, sizes and ns timestamps all fit well below this


def _int(value: Any, default: int = 0) -> int:
    """A non-negative integer field (decimal, float or 0x-hex text); out of range is malformed."""
    text = str(value).strip()
    if not text or text.upper() == "N/A":
        return default
    number = int(text[:32], 16) if text.lower().startswith("0x") else int(float(text[:64]))
    if not 0 <= abs(number) <= MAX_VALUE:
        raise ValueError(f"value out of range: {text[:40]}")
    return number


def _frames(text: str) -> tuple[tuple[str, str, int], ...]:
    frames = []
    for part in re.split(r"[\n;]", text or "", maxsplit=MAX_FRAMES)[:MAX_FRAMES]:
        if not part.strip():
            continue
        match = FRAME_RE.match(part)
        if match:
            frames.append((match["name"].strip(), match["file"].strip(), int(match["line"])))
        else:
            frames.append((part.strip(), "", 0))
    return tuple(frames)


class _DeviceBuilder:
    def __init__(self, device: int):
        self.device = device
        self.columns: list[list[int]] = [[] for _ in range(6)]  # action addr size stream t stack
        self.live: dict[int, tuple[int, int, int]] = {}  # addr -> size, stack, alloc index
        self.total = 0
        self.seen_total = False
        self.accesses: dict[int, list[int]] = {}  # alloc index -> [first, last, max gap] µs

    def emit(self, action: int, addr: int, size: int, time_ns: int, stack: int) -> int:
        for column, value in zip(self.columns, (action, addr, size, 0, time_ns // 1000, stack)):
            column.append(value)
        return len(self.columns[0]) - 1

    def pool_total(self, total: int, time_ns: int) -> None:
        self.seen_total = True
        if total > self.total:
            self.emit(SEG_MAP, PSEUDO_BASE + self.total, total - self.total, time_ns, -1)
        elif total < self.total:
            self.emit(SEG_UNMAP, PSEUDO_BASE + total, self.total - total, time_ns, -1)
        self.total = total


def _build(path: str, rows: list[dict[str, Any]]) -> Snapshot:
    rows.sort(key=lambda r: _int(r["ID"]))
    stacks: list[tuple] = []
    stack_ids: dict[tuple, int] = {}
    devices: dict[int, _DeviceBuilder] = {}
    hal_rows = []
    markers: list[dict[str, Any]] = []
    owners: dict[tuple[int, int], str] = {}  # (device, alloc row index) -> owner label
    finishing = False  # after SYSTEM ACL_FINI, frees are the tool's exit clean-up
    shadow_frees = 0
    pool_kinds: set[str] = set()
    for row in rows:
        event, kind = str(row["Event"]).strip().upper(), str(row["Event Type"]).strip().upper()
        if event == "SYSTEM" and kind == "ACL_FINI":
            finishing = True
        device_text = str(row["Device Id"]).strip()
        if event == "MSTX" and kind in ("MARK", "RANGE_START"):
            markers.append({"source": "mstx", "name": str(row.get("Name", ""))[:200],
                            "stage": "START", "time_us": _int(row["Timestamp(ns)"]) // 1000,
                            "device": int(device_text) if device_text.isdigit() else -1})
            continue
        if not device_text.isdigit():
            continue  # host memory ("cpu") is outside the device pools
        builder = devices.setdefault(int(device_text), _DeviceBuilder(int(device_text)))
        attr = parse_attr(str(row["Attr"]))
        time_ns = _int(row["Timestamp(ns)"])
        if time_ns < 0:
            raise ValueError(f"negative timestamp {time_ns} in row {row['ID']}")
        addr = _int(row["Ptr"]) or _int(attr.get("addr", 0))
        if event in ("MALLOC", "FREE") and kind == "HAL":
            hal_rows.append((builder, event, addr, abs(_int(attr.get("size", 0))), time_ns))
            continue
        if event == "ACCESS":
            _access(builder, addr, time_ns // 1000)
            continue
        if event not in ("MALLOC", "FREE") or kind not in POOL_TYPES:
            continue
        pool_kinds.add(kind)
        if "total" in attr:
            builder.pool_total(_int(attr["total"]), time_ns)
        frames = _frames(str(row.get("Call Stack(Python)") or ""))
        stack = -1
        if frames:
            stack = stack_ids.setdefault(frames, len(stacks))
            if stack == len(stacks):
                stacks.append(frames)
        size = abs(_int(attr.get("size", 0)))
        if event == "FREE" and (finishing or _is_shadow(attr)):
            shadow_frees += 1  # the program never freed it: it stays live at the end
            continue
        if event == "MALLOC":
            if stack < 0 and attr.get("owner"):  # no Python stack: the owner names the site
                frames = ((attr["owner"][:200], OWNER_FILE, 0),)
                stack = stack_ids.setdefault(frames, len(stacks))
                if stack == len(stacks):
                    stacks.append(frames)
            index = builder.emit(ALLOC, addr, size, time_ns, stack)
            builder.live[addr] = (size, stack, index)
            if attr.get("owner"):
                owners[(builder.device, index)] = attr["owner"][:200]
        else:
            size = builder.live.pop(addr, (size, -1, -1))[0]
            builder.emit(FREE_REQ, addr, size, time_ns, stack)
            builder.emit(FREE_DONE, addr, size, time_ns, stack)
    for builder, event, addr, size, time_ns in hal_rows:
        if not builder.seen_total:  # driver memory stands in for reserved
            builder.emit(SEG_ALLOC if event == "MALLOC" else SEG_FREE, addr, size, time_ns, -1)
    snapshot = _snapshot(path, devices, stacks, owners)
    if pool_kinds and pool_kinds <= {"MINDSPORE"}:
        snapshot.framework = "mindspore"
    snapshot.annotations = markers
    if shadow_frees:
        snapshot.notes.append(f"{shadow_frees} shadow frees (written by msMemScope at exit, "
                              "not by the program) count as never freed")
    return snapshot


def _is_shadow(attr: dict[str, str]) -> bool:
    value = attr.get("shadow", attr.get("is_shadow", ""))
    return str(value).strip().lower() not in ("", "0", "false", "no")


def _access(builder: _DeviceBuilder, addr: int, now: int) -> None:
    """Access times in µs, as MindStudio judges them (timestamps, not event counts)."""
    if addr not in builder.live:
        return
    alloc_index = builder.live[addr][2]
    record = builder.accesses.setdefault(alloc_index, [now, now, 0])
    record[2] = max(record[2], now - record[1])
    record[1] = now


def _snapshot(path: str, devices: dict[int, _DeviceBuilder], stacks: list[tuple],
              owners: dict[tuple[int, int], str]) -> Snapshot:
    traces, segments, accesses, owner_of = {}, [], {}, {}
    for device, b in sorted(devices.items()):
        order = np.argsort(np.asarray(b.columns[4], np.int64), kind="stable")  # HAL rows last
        remap = np.empty(len(order), np.int64)
        remap[order] = np.arange(len(order))
        cols = [np.asarray(c, np.int64)[order] for c in b.columns]
        traces[device] = DeviceTrace(device, cols[0].astype(np.int8), cols[1], cols[2], cols[3],
                                     cols[4], cols[5].astype(np.int32))
        live = [{"address": a, "size": s, "requested_size": s, "state": ACTIVE, "stack": st}
                for a, (s, st, _) in sorted(b.live.items())]
        if b.seen_total or live:
            segments.append(Segment(device, PSEUDO_BASE, b.total, 0, "large", (0, 0), True, live))
        _hal_segments(b, cols, segments)
        for index, (first, last, gap) in b.accesses.items():
            alloc = int(remap[index])
            accesses[(device, int(cols[1][alloc]), alloc)] = (first, last, gap)
        for (owner_device, index), owner in owners.items():
            if owner_device == device:
                owner_of[(device, int(remap[index]))] = owner
    snapshot = Snapshot(path, "msmemscope", segments, traces, stacks)
    snapshot.accesses = accesses
    snapshot.owners = owner_of
    snapshot.notes.append("msMemScope import: segment layout unknown, pool view shows totals")
    return snapshot


def _hal_segments(b: _DeviceBuilder, cols: list[np.ndarray], segments: list[Segment]) -> None:
    """Driver allocations still held at the end become the final segments."""
    held: dict[int, int] = {}
    for action, addr, size in zip(cols[0].tolist(), cols[1].tolist(), cols[2].tolist()):
        if action == SEG_ALLOC:
            held[addr] = size
        elif action == SEG_FREE:
            held.pop(addr, None)
    segments.extend(Segment(b.device, addr, size, 0, "large", (0, 0), False, [])
                    for addr, size in sorted(held.items()))

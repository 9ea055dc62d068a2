"""Import msMemScope `memscope_dump_*.csv` / `.db` exports into the snapshot model.

Columns (msMemScope docs/output_file_spec.md): ID, Event, Event Type, Name, Timestamp(ns),
Process Id, Thread Id, Device Id, Ptr, Attr, and optionally Call Stack(Python), Call Stack(C).
Attr is a `{key:value,...}` map (newer builds write JSON with quoted values). Mapping:

* MALLOC/FREE of a caching pool (PTA, ATB, MindSpore, PTA_WORKSPACE) -> alloc, and
  free_requested + free_completed; the pool's `total` attribute drives `reserved` through a
  pseudo expandable segment (the rows carry no segment layout, so the pool view shows totals
  but not addresses inside segments).
* HAL MALLOC/FREE (driver memory) -> segment_alloc / segment_free when no pool totals exist.
* OP_LAUNCH ATEN_START/END and ATB_START/END open and close operators per thread: each
  allocation keeps the operator open on its thread (`aten._to_copy.default`), which names the
  site of rows without a Python stack.
* ACCESS rows -> first/last access, the longest idle gap and the count per block, for MEM005.
* HOST / HOST_PINNED rows (device `cpu`/`host`) are outside the device pools: counted in a note.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from npu_migrate.core.sources import Skipped, open_regular
from npu_migrate.memory.limits import MAX_EVENTS, MAX_FRAMES, MAX_TEXT, SnapshotError
from npu_migrate.memory.model import (
    ACTIVE,
    PSEUDO_BASE,
    ALLOC,
    FREE_DONE,
    FREE_REQ,
    SEG_ALLOC,
    SEG_FREE,
    SEG_MAP,
    SEG_UNMAP,
    Access,
    DeviceTrace,
    Segment,
    Snapshot,
)

Row = dict[str, str]
Frames = tuple[tuple[str, str, int], ...]

REQUIRED = ("ID", "Event", "Event Type", "Timestamp(ns)", "Device Id", "Ptr", "Attr")
POOL_TYPES = {"PTA", "ATB", "MINDSPORE", "PTA_WORKSPACE"}
HOST_TYPES = {"HOST", "HOST_PINNED"}
OPERATOR_EDGES = {"ATEN_START": True, "ATEN_END": False, "ATB_START": True, "ATB_END": False}
TABLES = ("memscope_dump", "leaks_dump")
OWNER_FILE = "<owner>"  # pseudo frame file: the site is the msMemScope owner label
OPERATOR_FILE = "<operator>"  # pseudo frame file: the site is the operator open on the thread
MAX_VALUE = (1 << 62) - 1  # addresses, sizes and ns timestamps all fit well below this
MAX_OPEN_OPERATORS = 256  # nesting kept per thread (real nesting is a few levels)
FRAME_RE = re.compile(r"^\s*(?P<file>[^()]+?)\((?P<line>\d+)\)\s*:?\s*(?P<name>.*)$")


def load_msmemscope(path: str | Path) -> Snapshot:
    path = Path(path)
    try:
        reader = _read_db(path) if path.suffix == ".db" else _read_csv(path)
        rows = list(itertools.islice(reader, MAX_EVENTS + 1))
        if len(rows) > MAX_EVENTS:
            raise SnapshotError(f"{path}: refused: more than {MAX_EVENTS} rows")
    except Skipped as exc:
        raise SnapshotError(f"{exc}: an msMemScope export is a file") from None
    except (OSError, sqlite3.Error, csv.Error, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: not an msMemScope export: {exc}") from None
    except ValueError as exc:
        raise SnapshotError(f"{path}: not an msMemScope export: {exc}") from None
    try:
        return _Importer(str(path)).build(rows)
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        raise SnapshotError(f"{path}: malformed msMemScope row ({exc})") from None


def _read_csv(path: Path) -> Iterator[Row]:
    with open_regular(str(path)) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"missing columns {missing}")
        for row in reader:
            yield {k: ("" if v is None else str(v)) for k, v in row.items() if k is not None}


def _read_db(path: Path) -> Iterator[Row]:
    with open_regular(str(path)):  # a FIFO or a device raises Skipped before SQLite opens it
        pass
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
    """`{allocation_id:3,addr:0x12,size:512,owner:PTA@model}` or its JSON form with quoted
    values -> dict of strings."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out = {}
    for pair in body.split(","):
        key, sep, value = pair.partition(":")
        if sep:
            out[key.strip().strip('"')] = value.strip().strip('"')
    return out


def integer(value: str, what: str, row: str, default: int = 0, signed: bool = False) -> int:
    """A non-negative integer field (decimal or 0x-hex text; N/A or empty: `default`). Anything
    else is refused naming the row and the field: '512.5', 'abc', 'inf', 2**80. `signed`
    fields are read by magnitude (older builds write FREE sizes negative: size:-512)."""
    text = str(value).strip()
    if not text or text.upper() == "N/A":
        return default
    try:
        number = int(text[:40], 16) if text.lower().startswith("0x") else int(text[:40])
    except ValueError:
        raise ValueError(f"row {row}: field '{what}' is not an integer: {text[:40]!r}") from None
    if signed:
        number = abs(number)
    if not 0 <= number <= MAX_VALUE or len(text) > 40:
        raise ValueError(f"row {row}: field '{what}' out of range: {text[:40]}")
    return number


def _frames(text: str) -> Frames:
    frames = []
    for part in re.split(r"[\n;]", text or "", maxsplit=MAX_FRAMES)[:MAX_FRAMES]:
        if not part.strip():
            continue
        match = FRAME_RE.match(part)
        if match:
            frames.append((match["name"].strip()[:MAX_TEXT], match["file"].strip()[:MAX_TEXT],
                           int(match["line"][:12])))
        else:
            frames.append((part.strip()[:MAX_TEXT], "", 0))
    return tuple(frames)


def operator_name(name: str) -> str:
    """`torch._ops.aten._to_copy.default` -> `aten._to_copy.default`."""
    name = name.strip()[:MAX_TEXT]
    return name[len("torch._ops."):] if name.startswith("torch._ops.") else name


class _DeviceBuilder:
    COLUMNS = ("action", "addr", "size", "time", "stack", "operator", "process", "thread",
               "allocation_id")

    def __init__(self, device: int):
        self.device = device
        self.columns: dict[str, list[int]] = {name: [] for name in self.COLUMNS}
        self.live: dict[int, tuple[int, int, int]] = {}  # addr -> size, stack, alloc index
        self.total = 0
        self.seen_total = False
        self.accesses: dict[int, list[int]] = {}  # alloc index -> [first, last, max gap, n]
        self.owners: dict[int, str] = {}  # alloc index -> owner label

    def emit(self, action: int, addr: int, size: int, time_ns: int, stack: int = -1,
             operator: int = -1, who: tuple[int, int] = (-1, -1), allocation_id: int = -1
             ) -> int:
        values = (action, addr, size, time_ns // 1000, stack, operator, who[0], who[1],
                  allocation_id)
        for name, value in zip(self.COLUMNS, values):
            self.columns[name].append(value)
        return len(self.columns["action"]) - 1

    def pool_total(self, total: int, time_ns: int) -> None:
        self.seen_total = True
        if total > self.total:
            self.emit(SEG_MAP, PSEUDO_BASE + self.total, total - self.total, time_ns)
        elif total < self.total:
            self.emit(SEG_UNMAP, PSEUDO_BASE + total, self.total - total, time_ns)
        self.total = total

    def access(self, addr: int, now: int) -> None:
        """Access times in µs, as MindStudio judges them (timestamps, not event counts)."""
        if addr not in self.live:
            return
        alloc_index = self.live[addr][2]
        record = self.accesses.setdefault(alloc_index, [now, now, 0, 0])
        record[2] = max(record[2], now - record[1])
        record[1] = now
        record[3] += 1


class _Importer:
    """One pass over the rows in ID order; keeps the state the rows' meaning depends on."""

    def __init__(self, path: str):
        self.path = path
        self.stacks: list[Frames] = []
        self.stack_ids: dict[Frames, int] = {}
        self.operators: list[str] = []
        self.operator_ids: dict[str, int] = {}
        self.devices: dict[int, _DeviceBuilder] = {}
        self.open_ops: dict[tuple[int, int], list[str]] = {}  # (process, thread) -> names
        self.hal_rows: list[tuple[_DeviceBuilder, str, int, int, int]] = []
        self.markers: list[dict[str, object]] = []
        self.finishing = False  # after SYSTEM ACL_FINI, frees are the tool's exit clean-up
        self.shadow_frees = 0
        self.host_rows = 0
        self.pool_kinds: set[str] = set()

    def build(self, rows: list[Row]) -> Snapshot:
        ids = {id(r): integer(r["ID"], "ID", "?") for r in rows}
        rows.sort(key=lambda r: ids[id(r)])
        for row in rows:
            self.row(row, str(ids[id(row)]))
        for builder, event, addr, size, time_ns in self.hal_rows:
            if not builder.seen_total:  # driver memory stands in for reserved
                builder.emit(SEG_ALLOC if event == "MALLOC" else SEG_FREE, addr, size, time_ns)
        return self.snapshot()

    def row(self, row: Row, row_id: str) -> None:
        event, kind = row["Event"].strip().upper(), row["Event Type"].strip().upper()
        time_ns = integer(row["Timestamp(ns)"], "Timestamp(ns)", row_id)
        who = (integer(row.get("Process Id", ""), "Process Id", row_id, -1),
               integer(row.get("Thread Id", ""), "Thread Id", row_id, -1))
        if event == "SYSTEM" and kind == "ACL_FINI":
            self.finishing = True
        device_text = row["Device Id"].strip()
        if event == "MSTX" and kind in ("MARK", "RANGE_START"):
            self.markers.append({"source": "mstx", "name": row.get("Name", "")[:200],
                                 "stage": "START", "time_us": time_ns // 1000,
                                 "device": int(device_text) if device_text.isdigit() else -1})
            return
        if event == "OP_LAUNCH" and kind in OPERATOR_EDGES:
            self.operator_edge(who, operator_name(row.get("Name", "")), OPERATOR_EDGES[kind])
            return
        if not device_text.isdigit():
            self.host_rows += event in ("MALLOC", "FREE")
            return  # host memory ("cpu", "host") is outside the device pools
        device = integer(device_text, "Device Id", row_id)
        builder = self.devices.setdefault(device, _DeviceBuilder(device))
        attr = parse_attr(row["Attr"])
        addr = integer(row["Ptr"], "Ptr", row_id) or integer(attr.get("addr", ""), "addr", row_id)
        if event in ("MALLOC", "FREE") and kind == "HAL":
            size = integer(attr.get("size", ""), "size", row_id, signed=event == "FREE")
            self.hal_rows.append((builder, event, addr, size, time_ns))
        elif event == "ACCESS":
            builder.access(addr, time_ns // 1000)
        elif event in ("MALLOC", "FREE") and kind in HOST_TYPES:
            self.host_rows += 1
        elif event in ("MALLOC", "FREE") and kind in POOL_TYPES:
            self.pool_row(builder, row, row_id, attr, addr, time_ns, who)

    def operator_edge(self, who: tuple[int, int], name: str, start: bool) -> None:
        open_ops = self.open_ops.setdefault(who, [])
        if start:
            if len(open_ops) < MAX_OPEN_OPERATORS:
                open_ops.append(name)
        elif name in open_ops:  # close it and anything opened inside it and left open
            del open_ops[len(open_ops) - 1 - open_ops[::-1].index(name):]

    def intern(self, frames: Frames) -> int:
        if not frames:
            return -1
        found = self.stack_ids.setdefault(frames, len(self.stacks))
        if found == len(self.stacks):
            self.stacks.append(frames)
        return found

    def pool_row(self, builder: _DeviceBuilder, row: Row, row_id: str, attr: dict[str, str],
                 addr: int, time_ns: int, who: tuple[int, int]) -> None:
        kind, event = row["Event Type"].strip().upper(), row["Event"].strip().upper()
        self.pool_kinds.add(kind)
        if "total" in attr:
            builder.pool_total(integer(attr["total"], "total", row_id), time_ns)
        size = integer(attr.get("size", ""), "size", row_id, signed=event == "FREE")
        allocation_id = integer(attr.get("allocation_id", ""), "allocation_id", row_id, -1)
        open_ops = self.open_ops.get(who, [])
        operator = -1
        if open_ops:
            operator = self.operator_ids.setdefault(open_ops[-1], len(self.operators))
            if operator == len(self.operators):
                self.operators.append(open_ops[-1])
        if event == "FREE" and (self.finishing or _is_shadow(attr)):
            self.shadow_frees += 1  # the program never freed it: it stays live at the end
            return
        if event == "FREE":
            size, stack, _ = builder.live.pop(addr, (size, -1, -1))
            builder.emit(FREE_REQ, addr, size, time_ns, stack, operator, who, allocation_id)
            builder.emit(FREE_DONE, addr, size, time_ns, stack, operator, who, allocation_id)
            return
        frames = _frames(row.get("Call Stack(Python)", ""))
        if not frames:  # no Python stack: the operators open on the thread, then the owner
            frames = tuple((name, OPERATOR_FILE, 0) for name in reversed(open_ops))
            if attr.get("owner"):
                frames += ((attr["owner"][:200], OWNER_FILE, 0),)
        stack = self.intern(frames)
        index = builder.emit(ALLOC, addr, size, time_ns, stack, operator, who, allocation_id)
        builder.live[addr] = (size, stack, index)
        if attr.get("owner"):
            builder.owners[index] = attr["owner"][:200]

    def snapshot(self) -> Snapshot:
        snapshot = Snapshot(self.path, "msmemscope", [], {}, self.stacks)
        snapshot.operators = self.operators
        for _, builder in sorted(self.devices.items()):
            _add_device(snapshot, builder)
        if self.pool_kinds and self.pool_kinds <= {"MINDSPORE"}:
            snapshot.framework = "mindspore"
        snapshot.annotations = self.markers
        snapshot.notes.append("msMemScope import: segment layout unknown, pool view shows totals")
        if self.shadow_frees:
            snapshot.notes.append(f"{self.shadow_frees} shadow frees (written by msMemScope at "
                                  "exit, not by the program) count as never freed")
        if self.host_rows:
            snapshot.notes.append(f"{self.host_rows} host memory rows (HOST, HOST_PINNED or "
                                  "device cpu/host) are outside the device pools: not analysed")
        return snapshot


def _is_shadow(attr: dict[str, str]) -> bool:
    value = attr.get("shadow", attr.get("is_shadow", ""))
    return str(value).strip().lower() not in ("", "0", "false", "no")


def _add_device(snapshot: Snapshot, b: _DeviceBuilder) -> None:
    """Columns in time order (HAL rows were appended last), the final pseudo segment, and the
    per-block owners and accesses re-keyed by the sorted event index."""
    device = b.device
    times = np.asarray(b.columns["time"], np.int64)
    order = np.argsort(times, kind="stable")
    remap = np.empty(len(order), np.int64)
    remap[order] = np.arange(len(order))
    cols = {name: np.asarray(values, np.int64)[order] for name, values in b.columns.items()}
    trace = DeviceTrace(device, cols["action"].astype(np.int8), cols["addr"], cols["size"],
                        np.zeros(len(order), np.int64), cols["time"],
                        cols["stack"].astype(np.int32))
    trace.operator = cols["operator"].astype(np.int32)
    trace.process, trace.thread = cols["process"], cols["thread"]
    trace.allocation_id = cols["allocation_id"]
    snapshot.traces[device] = trace
    live = [{"address": a, "size": s, "requested_size": s, "state": ACTIVE, "stack": st}
            for a, (s, st, _) in sorted(b.live.items())]
    if b.seen_total or live:
        snapshot.segments.append(Segment(device, PSEUDO_BASE, b.total, 0, "large", (0, 0), True,
                                         live))
    _hal_segments(b, cols, snapshot.segments)
    for index, (first, last, gap, count) in b.accesses.items():
        snapshot.accesses[(device, int(remap[index]))] = Access(first, last, gap, count)
    for index, owner in b.owners.items():
        snapshot.owners[(device, int(remap[index]))] = owner


def _hal_segments(b: _DeviceBuilder, cols: dict[str, np.ndarray], segments: list[Segment]
                  ) -> None:
    """Driver allocations still held at the end become the final segments."""
    held: dict[int, int] = {}
    for action, addr, size in zip(cols["action"].tolist(), cols["addr"].tolist(),
                                  cols["size"].tolist()):
        if action == SEG_ALLOC:
            held[addr] = size
        elif action == SEG_FREE:
            held.pop(addr, None)
    segments.extend(Segment(b.device, addr, size, 0, "large", (0, 0), False, [])
                    for addr, size in sorted(held.items()))


"""Load a memory-snapshot pickle safely and normalise every known variant into `Snapshot`.

Snapshots hold only builtins, so the unpickler refuses every class: a hostile pickle cannot
import or call anything. Variants handled: current CUDA, old CUDA (top-level list of segments,
legacy `history` blocks), torch_npu (no `time_us`, leading `workspace_snapshot` triples),
several devices, expandable segments, private pools and ring-buffer-truncated traces.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import re
import reprlib
from collections import Counter, defaultdict
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any

import numpy as np

from npu_migrate.core.sources import Skipped, open_regular
from npu_migrate.memory.consistency import check_label
from npu_migrate.memory.model import (
    ACTIVE,
    ALLOC,
    CODE,
    INACTIVE,
    OOM,
    PENDING,
    SEG_ALLOC,
    WORKSPACE,
    DeviceTrace,
    Segment,
    Snapshot,
)
from npu_migrate.memory.limits import (
    MAX_ADDRESS,
    MAX_BLOCKS,
    MAX_EVENTS,
    MAX_FILE_BYTES,
    MAX_FRAMES,
    MAX_SEGMENTS,
    MAX_SIZE,
    MAX_TEXT,
    MAX_TIME,
    SnapshotError,
)

STATE_ALIASES = {"active_awaiting_free": PENDING, "active_pending_free": PENDING,
                 ACTIVE: ACTIVE, INACTIVE: INACTIVE}
OTHER = CODE["other"]


class RefusingUnpickler(pickle.Unpickler):
    """Builds only builtin containers and scalars: any GLOBAL/STACK_GLOBAL is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load class {module}.{name}")


def read_pickle(path: str | Path) -> Any:
    """Unpickle with the refusing unpickler; every failure becomes a one-line SnapshotError."""
    try:
        # a FIFO, a device or a socket is refused before any read: a blocking open of a FIFO
        # waits for a writer forever, /dev/zero never ends
        with open_regular(str(path)) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise SnapshotError(f"{path}: refused: {size} bytes is over the "
                                    f"{MAX_FILE_BYTES >> 30} GiB cap")
            return RefusingUnpickler(io.BufferedReader(handle, 1 << 20)).load()
    except Skipped as exc:
        raise SnapshotError(f"{exc}: a snapshot is a file") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except pickle.UnpicklingError as exc:
        raise SnapshotError(f"{path}: not a memory snapshot: {exc}") from None
    except EOFError:
        raise SnapshotError(f"{path}: not a memory snapshot: the pickle is truncated") from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError,
            UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: not a memory snapshot: corrupt pickle ({exc})") from None
    except MemoryError:
        raise SnapshotError(f"{path}: refused: unpickling it needs more memory than there "
                            "is") from None
    except RecursionError:
        raise SnapshotError(f"{path}: refused: nested too deeply") from None


def load_snapshot(path: str | Path) -> Snapshot:
    """Load a snapshot pickle, or an msMemScope CSV/DB export, from `path`."""
    text = str(path)
    if text.endswith((".csv", ".db")):
        from npu_migrate.memory.msmemscope import load_msmemscope

        return load_msmemscope(path)
    # Millions of fresh dicts would trigger the cyclic GC over and over (it costs more than
    # the unpickling itself); snapshots hold no cycles, so pause it while loading.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return normalise(read_pickle(path), text)
    finally:
        if was_enabled:
            gc.enable()


def normalise(data: Any, path: str = "<memory>") -> Snapshot:
    """Turn an unpickled object into a Snapshot, or raise SnapshotError saying what is wrong."""
    producer = "cuda"
    if isinstance(data, list):  # segments-only dump of old CUDA releases
        data, producer = {"segments": data, "device_traces": []}, "cuda-legacy"
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        kind = type(data).__name__
        raise SnapshotError(f"{path}: not a memory snapshot: expected a dict with 'segments', "
                            f"got {kind}")
    traces_raw = data.get("device_traces", [])
    if not isinstance(traces_raw, list) or not all(isinstance(t, list) for t in traces_raw):
        raise SnapshotError(f"{path}: malformed snapshot: 'device_traces' is not a list of lists")
    check_size(path, data["segments"], traces_raw)
    interner = _StackInterner()
    segments = []
    for index, raw in enumerate(data["segments"]):
        try:
            segments.append(_segment(raw, interner))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise SnapshotError(f"{path}: malformed snapshot: bad segment {index} "
                                f"({_why(exc)})") from None
    traces: dict[int, DeviceTrace] = {}
    unknown: Counter[str] = Counter()
    for device, entries in enumerate(traces_raw):
        try:
            traces[device] = _columns(device, entries, interner, unknown)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise SnapshotError(f"{path}: malformed snapshot: bad trace entry on device {device} "
                                f"({_why(exc)})") from None
    annotations = _annotations(path, data.get("external_annotations", []))
    settings = data.get("allocator_settings", {})
    if not isinstance(settings, dict):
        raise SnapshotError(f"{path}: malformed snapshot: 'allocator_settings' is "
                            f"{_described(settings)}, not a dict")
    snapshot = Snapshot(path, producer, segments, traces, interner.table, settings, annotations)
    if unknown:
        snapshot.notes.append("actions this reader does not know, kept as 'other': "
                              + ", ".join(sorted(a[:40] for a in unknown)[:10]))
    snapshot.category_names = list(interner.categories)
    _adapt_workspace(snapshot)
    has_time = any(t.time_us is not None for t in traces.values() if len(t))
    has_events = any(len(t) for t in traces.values())
    if producer == "cuda" and (any(t.workspace_heads for t in traces.values()) or (
            has_events and not has_time and "allocator_settings" not in data)):
        snapshot.producer = "torch_npu"
    check_label(snapshot)
    if not has_events:
        snapshot.notes.append("no trace recorded: only the dump-time state is known")
    elif not has_time:
        snapshot.notes.append("no time_us in the trace: times are event indices")
    return snapshot


ANNOTATION_FIELDS = {"name": str, "stage": str, "time_us": int, "device": int}


def _annotations(path: str, raw: Any) -> list[dict[str, Any]]:
    """record_function annotations: a list of dicts whose fields have their types."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SnapshotError(f"{path}: malformed snapshot: 'external_annotations' is "
                            f"{_described(raw)}, not a list")
    for index, entry in enumerate(raw[:MAX_EVENTS]):
        if not isinstance(entry, dict):
            raise SnapshotError(f"{path}: malformed snapshot: external annotation {index} is "
                                f"{_described(entry)}, not a dict")
        for key, kind in ANNOTATION_FIELDS.items():
            value = entry.get(key)
            wrong_type = isinstance(value, bool) or not isinstance(value, kind)
            if value is not None and (wrong_type or (
                    isinstance(value, int) and not 0 <= value <= MAX_TIME)):
                raise SnapshotError(f"{path}: malformed snapshot: external annotation {index}:"
                                    f" field '{key}' is {_described(value)}, not "
                                    f"{'a string' if kind is str else 'an integer in range'}")
    return raw[:MAX_EVENTS]


def check_size(path: str, segments: list[Any], traces: list[Any]) -> None:
    """Refuse inputs over the caps before touching their contents. A pickle's memo lets a few
    megabytes name the same list many times (128 devices x 1M events from a 4 MB file), so
    shared lists are refused too: a real dump never repeats a trace or a block list."""
    if len(segments) > MAX_SEGMENTS:
        raise SnapshotError(f"{path}: refused: {len(segments)} segments is over the cap of "
                            f"{MAX_SEGMENTS}")
    if len({id(t) for t in traces if t}) < sum(1 for t in traces if t):
        raise SnapshotError(f"{path}: refused: the same trace list appears several times "
                            "(a pickle whose memo references expand it)")
    events = sum(len(t) for t in traces)
    if events > MAX_EVENTS:
        raise SnapshotError(f"{path}: refused: {events} trace events is over the cap of "
                            f"{MAX_EVENTS}")
    block_lists: list[list[Any]] = [s["blocks"] for s in segments if isinstance(s, dict)
                                    and isinstance(s.get("blocks"), list) and s["blocks"]]
    if len({id(b) for b in block_lists}) < len(block_lists):
        raise SnapshotError(f"{path}: refused: the same block list appears in several segments "
                            "(a pickle whose memo references expand it)")
    blocks = sum(len(b) for b in block_lists)
    if blocks > MAX_BLOCKS:
        raise SnapshotError(f"{path}: refused: {blocks} blocks is over the cap of {MAX_BLOCKS}")


def _checked(value: Any, what: str, limit: int) -> int:
    """An int in [0, limit]; anything else (a float, inf, nan, 2**80, negative, the text
    '512', True) is malformed."""
    if type(value) is not int:
        raise TypeError(f"{what} is {_described(value)}, not an integer")
    if not 0 <= value <= limit:
        raise ValueError(f"{what} out of range: {value!r}")
    return value


def _why(exc: Exception) -> str:
    return f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)


class _StackInterner:
    """Maps frame lists to indices; identical stacks share one list after unpickling, so the
    object identity is tried first and the content second."""

    def __init__(self) -> None:
        self.table: list[tuple[tuple[str, str, int], ...]] = []
        self._by_content: dict[tuple, int] = {}
        self._by_id: dict[int, int] = {}
        self._keep: list[Any] = []  # keeps ids stable while loading
        self.categories: dict[str, int] = {}  # producer-given categories

    def index(self, frames: Any) -> int:
        if not frames:
            return -1
        found = self._by_id.get(id(frames))
        if found is not None:
            return found
        if not isinstance(frames, (list, tuple)):
            raise TypeError(f"frames is a {type(frames).__name__}, not a list")
        key = tuple(_frame(f) for f in frames[:MAX_FRAMES])
        found = self._by_content.get(key)
        if found is None:
            found = self._by_content[key] = len(self.table)
            self.table.append(key)
        self._by_id[id(frames)] = found
        self._keep.append(frames)
        return found


# the C++ unwinder writes -1 as an unsigned 64-bit line when CPython has no line number
# for a frame (seen in Python 3.13 traces); it means "unknown", not a malformed file
UNKNOWN_LINE = (1 << 64) - 1
PROFILER_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<name>.+)$")


def _frame(raw: Any) -> tuple[str, str, int]:
    """(name, filename, line). Snapshots made from a profile (`_profile_to_snapshot`) write
    `filename 'none'` and put `path(line): function` into the name; split those."""
    if not isinstance(raw, dict):
        raise TypeError(f"a frame is {_described(raw)}, not a dict")
    name, filename = _text(raw.get("name", "?"), "frame name"), _text(
        raw.get("filename", "?"), "frame file")
    if filename == "none":
        match = PROFILER_FRAME.match(name)
        if match:
            return match["name"], match["file"], int(match["line"][:18])
    line = raw.get("line", 0)
    if line is None or line == UNKNOWN_LINE:
        line = 0
    return name, filename, _checked(line, "frame line", 1 << 31)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {_described(value)}, not a string")
    return value[:MAX_TEXT]


def _segment(raw: Any, interner: _StackInterner) -> Segment:
    if not isinstance(raw, dict):
        raise TypeError(f"a segment is {_described(raw)}, not a dict")
    address = _checked(raw["address"], "segment address", MAX_ADDRESS)
    blocks, cursor = [], address
    raw_blocks = raw.get("blocks", [])
    if not isinstance(raw_blocks, list):
        raise TypeError(f"'blocks' is {_described(raw_blocks)}, not a list")
    for block in raw_blocks:
        if not isinstance(block, dict):
            raise TypeError(f"a block is {_described(block)}, not a dict")
        frames = block.get("frames")
        requested = block.get("requested_size")
        if "history" in block:  # legacy block: the newest history record carries the stack
            history = block["history"]
            if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
                raise TypeError(f"block 'history' is {_described(history)}, not a list of dicts")
            last = history[-1] if history else {}
            frames = frames or last.get("frames")
            requested = requested if requested is not None else last.get("real_size")
        size = _checked(block["size"], "block size", MAX_SIZE)
        state = block.get("state", INACTIVE)
        if not isinstance(state, str) or state not in STATE_ALIASES:
            raise ValueError(f"block state is {_described(state)}, not one of "
                             f"{', '.join(sorted(STATE_ALIASES))}")
        state = STATE_ALIASES[state]
        blocks.append({"address": _checked(block.get("address", cursor), "block address",
                                           MAX_ADDRESS), "size": size,
                       "requested_size": _checked(requested if requested is not None else size,
                                                  "requested size", MAX_SIZE),
                       "state": state, "stack": interner.index(frames)})
        cursor += size
    pool = raw.get("segment_pool_id", (0, 0))
    if not isinstance(pool, (list, tuple)) or len(pool) != 2:
        raise TypeError(f"segment_pool_id is {_described(pool)}, not a pair of integers")
    pool_id = tuple(_checked(p, "segment_pool_id", (1 << 64) - 1) for p in pool)
    kind = raw.get("segment_type", "large")
    if kind not in ("large", "small"):
        raise ValueError(f"segment_type is {_described(kind)}, not 'large' or 'small'")
    expandable = raw.get("is_expandable", False)
    if type(expandable) is not bool:
        raise TypeError(f"is_expandable is {_described(expandable)}, not a boolean")
    return Segment(_checked(_or_zero(raw.get("device")), "device", 1 << 16), address,
                   _checked(raw["total_size"], "segment size", MAX_SIZE),
                   _checked(_or_zero(raw.get("stream")), "stream", (1 << 64) - 1),
                   kind, pool_id, expandable, blocks)


def _or_zero(value: Any) -> Any:
    return 0 if value is None else value


def _column(entries: list[dict[str, Any]], key: str, optional: bool = False) -> np.ndarray:
    """One int64 column. Every value must be an int (numpy would turn the string '512' into
    512 silently); `optional` fields may be missing or None (oom entries have no addr, some
    producers omit stream) and read as 0."""
    try:
        values = list(map(itemgetter(key), entries))
    except KeyError:
        if not optional:
            index = next(i for i, e in enumerate(entries) if key not in e)
            raise ValueError(f"event {index}: field '{key}' is missing") from None
        values = [e.get(key) for e in entries]
    kinds = set(map(type, values))
    if not kinds <= {int, type(None)} or (type(None) in kinds and not optional):
        index, value = next((i, v) for i, v in enumerate(values) if type(v) is not int
                            and not (optional and v is None))
        raise TypeError(f"event {index}: field '{key}' is {_described(value)}, not an integer")
    try:
        return np.fromiter((0 if v is None else v for v in values) if type(None) in kinds
                           else values, np.int64, len(values))
    except OverflowError:
        raise ValueError(f"'{key}' out of range (over 64 bits)") from None


SHORT = reprlib.Repr()  # a value's text for a message: short, and safe on deep nesting
SHORT.maxlevel, SHORT.maxstring, SHORT.maxother, SHORT.maxlist, SHORT.maxdict = 2, 40, 40, 4, 4


def _described(value: Any) -> str:
    """`a str ('512')`, `a float (inf)`, `None`: what a field holds, for an error message."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} ({SHORT.repr(value)})"


def _columns(device: int, entries: list[Any], interner: _StackInterner,
             unknown: Counter[str]) -> DeviceTrace:
    n = len(entries)
    bad = next((i for i, e in enumerate(entries) if not isinstance(e, dict)), None)
    if bad is not None:
        raise TypeError(f"event {bad} is {_described(entries[bad])}, not a dict")
    names = _column_of_text(entries, "action")
    unknown.update(a for a in set(names) if a not in CODE)
    codes = defaultdict(lambda: OTHER, CODE)
    action = np.fromiter(map(codes.__getitem__, names), np.int8, n)
    oom = np.flatnonzero(action == OOM)
    addr = _column(entries, "addr", optional=bool(len(oom)))
    size = _column(entries, "size")
    stream = _column(entries, "stream", optional=True)
    time_us = _column(entries, "time_us") if n and "time_us" in entries[0] else None
    for i in oom:  # oom carries device_free where others carry addr
        free = entries[i].get("device_free", 0)
        if type(free) is not int:
            raise TypeError(f"event {i}: field 'device_free' is {_described(free)}, not an "
                            "integer")
        addr[i] = free
    _in_range(addr, "address", MAX_ADDRESS)
    _in_range(size, "size", MAX_SIZE)
    if time_us is not None:
        _in_range(np.abs(time_us), "time_us", MAX_TIME)
    stack = _stack_column(entries, interner)
    trace = DeviceTrace(device, action, addr, size, stream, time_us, stack)
    if n and any("category" in e for e in entries[:64]):
        named = interner.categories
        trace.category = np.fromiter(
            (named.setdefault(str(c), len(named)) if c else -1
             for c in map(methodcaller("get", "category"), entries)), np.int16, n)
    return trace


def _column_of_text(entries: list[dict[str, Any]], key: str) -> list[str]:
    try:
        values = list(map(itemgetter(key), entries))
    except KeyError:
        index = next(i for i, e in enumerate(entries) if key not in e)
        raise ValueError(f"event {index}: field '{key}' is missing") from None
    if set(map(type, values)) != {str} and values:
        index, value = next((i, v) for i, v in enumerate(values) if type(v) is not str)
        raise TypeError(f"event {index}: field '{key}' is {_described(value)}, not a string")
    return values


def _in_range(values: np.ndarray, what: str, limit: int) -> None:
    bad = np.flatnonzero((values < 0) | (values > limit))
    if len(bad):
        raise ValueError(f"event {int(bad[0])}: {what} out of range: {int(values[bad[0]])}")


def _stack_column(entries: list, interner: _StackInterner) -> np.ndarray:
    frames = list(map(methodcaller("get", "frames"), entries))
    if not frames:
        return np.zeros(0, np.int32)
    ids = np.fromiter(map(id, frames), np.int64, len(frames))
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    table = np.fromiter((interner.index(frames[i]) for i in first), np.int32, len(unique))
    return table[inverse.ravel()]


def _adapt_workspace(snapshot: Snapshot) -> None:
    """torch_npu puts (workspace_snapshot, segment_alloc, alloc) triples for live workspace
    blocks at the head of a trace although they describe dump-time state, while `segments`
    shows that workspace segment as one inactive block. Like MindStudio, count the triples and
    mark the matching segments fully allocated so the replay balances."""
    for device, trace in snapshot.traces.items():
        heads, i = 0, 0
        acts = trace.action
        while (i + 2 < len(acts) and acts[i] == WORKSPACE and acts[i + 1] == SEG_ALLOC
               and acts[i + 2] == ALLOC and trace.addr[i] == trace.addr[i + 2]):
            _mark_allocated(snapshot, device, int(trace.addr[i]), int(trace.size[i]))
            heads, i = heads + 1, i + 3
        trace.workspace_heads = heads


def _mark_allocated(snapshot: Snapshot, device: int, addr: int, size: int) -> None:
    for seg in snapshot.segments:
        if seg.device == device and seg.address == addr:
            stack = seg.blocks[0]["stack"] if seg.blocks else -1
            seg.blocks = [{"address": addr, "size": seg.total_size, "requested_size": size,
                           "state": ACTIVE, "stack": stack}]
            return

"""A deliberately plain, dict-based replay used as the independent oracle in tests."""

from __future__ import annotations

import pickle
from collections import Counter


class NoClasses(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name}")


def load_raw(path):
    with open(path, "rb") as handle:
        return NoClasses(handle).load()


def final_live(raw, device):
    """addr -> requested size of blocks allocated at dump time (pending ones excluded)."""
    if isinstance(raw, list):
        raw = {"segments": raw}
    live, pending = {}, {}
    for seg in raw["segments"]:
        if seg.get("device", 0) != device:
            continue
        cursor = seg["address"]  # blocks may omit their address: they tile the segment
        for block in seg["blocks"]:
            address = block.get("address", cursor)
            cursor = address + block["size"]
            requested = block.get("requested_size", block["size"])
            if block["state"] == "active_allocated":
                live[address] = requested
            elif block["state"] in ("active_pending_free", "active_awaiting_free"):
                pending[address] = requested
    return live, pending


def replay(raw, device):
    """Allocated bytes after every event, the live set at the peak and action counts."""
    if isinstance(raw, list):  # an old segments-only dump: a bare list of segments
        raw = {"segments": raw, "device_traces": []}
    traces = raw.get("device_traces", [])
    trace = traces[device] if device < len(traces) else []
    live, _ = final_live(raw, device)
    # walk backwards from the dump-time state to the state before the first event
    start = dict(live)
    for entry in reversed(trace):
        action = entry["action"]
        if action == "alloc":
            start.pop(entry["addr"], None)
        elif action == "free_requested":
            start[entry["addr"]] = entry["size"]
    current = dict(start)
    allocated, total = [], sum(current.values())
    peak, peak_index, peak_live = total, -1, dict(current)
    frames_at = {}
    for index, entry in enumerate(trace):
        action = entry["action"]
        if action == "alloc":
            current[entry["addr"]] = entry["size"]
            frames_at[entry["addr"]] = entry.get("frames", [])
            total += entry["size"]
        elif action == "free_requested":
            total -= current.pop(entry["addr"], entry["size"])
        allocated.append(total)
        if total > peak:
            peak, peak_index, peak_live = total, index, dict(current)
    reserved_end = sum(s["total_size"] for s in raw["segments"] if s.get("device", 0) == device)
    counts = Counter(e["action"] for e in trace)
    return {"allocated": allocated, "peak": peak, "peak_index": peak_index,
            "peak_live": peak_live, "start": start, "counts": counts,
            "reserved_end": reserved_end, "frames_at": frames_at}


def never_freed_by_site(raw, device, filename_part):
    """(bytes, count, first event, last event) of allocations never freed in the trace, keyed
    by the innermost frame whose file contains `filename_part`."""
    trace = raw["device_traces"][device]
    open_allocs = {}
    for index, entry in enumerate(trace):
        if entry["action"] == "alloc":
            open_allocs[entry["addr"]] = (index, entry)
        elif entry["action"] == "free_requested":
            open_allocs.pop(entry["addr"], None)
    sites = {}
    for index, entry in open_allocs.values():
        frame = next((f for f in entry.get("frames", []) if filename_part in f["filename"]), None)
        if frame is None:
            continue
        key = f"{frame['filename'].rsplit('/', 1)[-1]}:{frame['line']} ({frame['name']})"
        size, count, first, last = sites.get(key, (0, 0, index, index))
        sites[key] = (size + entry["size"], count + 1, min(first, index), max(last, index))
    return sites


def msmemscope_rows(path):
    """The rows of an msMemScope export (CSV or the .db table), as dicts of strings."""
    import csv
    import sqlite3

    if str(path).endswith(".db"):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            table = next(t for (t,) in conn.execute("SELECT name FROM sqlite_master")
                         if t in ("memscope_dump", "leaks_dump"))
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            return [{k: "" if v is None else str(v) for k, v in zip(names, row)}
                    for row in cursor]
        finally:
            conn.close()
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def replay_msmemscope(path):
    """device -> (peak allocated, allocated at the end) from the pool MALLOC/FREE rows, replayed
    in ID order with plain dicts: sizes by magnitude, the exit clean-up (after ACL_FINI or
    marked shadow) not counted as frees, and what was held before the first row taken as the
    least the trace allows (a free of an unknown block means it existed)."""
    import re

    size_re = re.compile(r'"?size"?\s*:\s*"?(-?\d+)')
    rows = sorted(msmemscope_rows(path), key=lambda r: int(r["ID"]))
    live, totals, series, finishing = {}, {}, {}, False
    for row in rows:
        event, kind = row["Event"].strip().upper(), row["Event Type"].strip().upper()
        if event == "SYSTEM" and kind == "ACL_FINI":
            finishing = True
        device = row["Device Id"].strip()
        if event not in ("MALLOC", "FREE") or not device.isdigit() or kind not in (
                "PTA", "ATB", "MINDSPORE", "PTA_WORKSPACE"):
            continue
        attr = row["Attr"]
        if event == "FREE" and (finishing or "shadow" in attr):
            continue
        device = int(device)
        match = size_re.search(attr)
        size = abs(int(match.group(1))) if match else 0
        ptr = row["Ptr"].strip().lower()
        held = live.setdefault(device, {})
        if event == "MALLOC":
            held[ptr] = size
            totals[device] = totals.get(device, 0) + size
        else:
            totals[device] = totals.get(device, 0) - held.pop(ptr, size)
        series.setdefault(device, []).append(totals[device])
    out = {}
    for device, values in series.items():
        start = max(0, -min(values))
        out[device] = (start + max(max(values), 0), start + values[-1])
    return out

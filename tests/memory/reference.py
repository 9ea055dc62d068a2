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
    trace = raw["device_traces"][device]
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

"""The inputs behind the Example section of every MEM code page (npu_migrate/memory/data/codes.toml).

    python tests/memory/code_examples.py     # rewrites fixtures/memory/examples/

Each page shows a command on one of these files and the finding line it prints;
tests/memory/test_codes.py runs the command and checks the line, so a page cannot drift from
what the analyzer says.
"""

from __future__ import annotations

import csv
import pickle
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from npu_migrate.memory.scenarios import idle_run, starts_with_frees  # noqa: E402
from npu_migrate.memory.synthetic import MiB, training_snapshot  # noqa: E402

FOLDER = REPO / "fixtures" / "memory" / "examples"
COMPARE = REPO / "fixtures" / "memory" / "msmemscope_compare"
# code -> the command's arguments after `npu-migrate memory`, paths relative to the repository
COMMANDS = {
    "MEM001": ["compare", "fixtures/memory/msmemscope_compare/baseline.csv",
               "fixtures/memory/msmemscope_compare/leaks.csv"],
    "MEM002": ["fixtures/memory/examples/training.pickle"],
    "MEM003": ["fixtures/memory/examples/oom.pickle"],
    "MEM004": ["fixtures/memory/examples/training.pickle"],
    "MEM005": ["fixtures/memory/examples/stale_logits.pickle"],
    "MEM006": ["fixtures/memory/examples/ring_buffer_cut.pickle"],
    "MEM007": ["fixtures/memory/examples/training.pickle"],
    "MEM008": ["fixtures/memory/examples/pending_free.pickle"],
    "MEM009": ["fixtures/memory/examples/memscope_dump_used_over_total.csv"],
}


def _without_facts(data: dict[str, Any]) -> dict[str, Any]:
    data.pop("_facts", None)
    return data


def with_oom(data: dict[str, Any]) -> dict[str, Any]:
    """The run ends asking for 48 GiB with 2 GiB free on the device."""
    trace = data["device_traces"][0]
    last = trace[-1]
    trace.append({"action": "oom", "device_free": 2 << 30, "size": 48 << 30,
                  "stream": last["stream"], "time_us": last["time_us"] + 5,
                  "frames": trace[-1].get("frames", [])})
    return data


def used_over_total() -> list[list[object]]:
    """msMemScope rows whose pool `used` exceeds its `total` (as the smoke-test export has)."""
    rows, clock = [], 1_746_006_014_162_153
    for i in range(4):
        clock += 1000
        rows.append([i + 1, "MALLOC", "PTA", "N/A", clock, 7, 7, 0, f"0x{0x1000 + i * MiB:x}",
                     f"{{addr:0x{0x1000 + i * MiB:x},size:{MiB},owner:,total:{2 * MiB},"
                     f"used:{(i + 1) * MiB}}}", "", ""])
    return rows


def build(folder: Path = FOLDER) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    made = {
        "training.pickle": _without_facts(training_snapshot(1200, layers=4, seed=3)),
        "oom.pickle": with_oom(_without_facts(training_snapshot(400, layers=4, seed=5,
                                                                leak=False))),
        "stale_logits.pickle": _without_facts(idle_run(layers=4, steps=3, stale_logits=True)),
        "ring_buffer_cut.pickle": _without_facts(starts_with_frees(16, 8 * MiB)[0]),
        "pending_free.pickle": _without_facts(training_snapshot(400, layers=4, seed=7,
                                                                leak=False,
                                                                pending_at_end=True)),
    }
    out = []
    for name, data in made.items():
        path = folder / name
        path.write_bytes(pickle.dumps(data, protocol=4))
        out.append(path)
    path = folder / "memscope_dump_used_over_total.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id",
                         "Thread Id", "Device Id", "Ptr", "Attr", "Call Stack(Python)",
                         "Call Stack(C)"])
        writer.writerows(used_over_total())
    out.append(path)
    return out


if __name__ == "__main__":
    for made in build(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER):
        print(made)

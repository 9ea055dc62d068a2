"""msprobe's statistics dump format, read and written, so a dump taken on an Ascend device with
msprobe can be compared offline with a CPU/GPU run, and ours can be read by msprobe's tools.

The layout follows msprobe's public documentation: `dump.json` holds
`{"task": "statistics", "level": ..., "dump_data_dir": null, "data": {NAME: {"input_args": [...],
"input_kwargs": {...}, "output": [...]}}}` where NAME is `Prefix.api.N.forward` (e.g.
`Functional.conv2d.0.forward`) and each tensor entry has type, dtype, shape and the statistics
Max/Min/Mean/Norm; `stack.json` maps NAME to the call stack lines. We write the aten level
(`Aten.addmm.default.0.forward`): compare a device dump with a CPU dump taken at the same level.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^(?P<api>.+)\.(?P<index>\d+)\.(?P<direction>forward|backward)$")


class DumpError(Exception):
    """A dump.json that cannot be read: the message names the file."""


def _api_name(event: dict[str, Any]) -> str:
    name = event["name"]
    if name.startswith("aten."):
        return "Aten." + name[len("aten."):]
    return name.capitalize() if name == "loss" else name


def write_dump(directory: Path, events: list[dict[str, Any]], root: str, level: str = "L2") -> Path:
    """Write `events` (ops and losses of a record) as msprobe's dump.json and stack.json."""
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    stacks: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for event in events:
        if event["kind"] not in ("op", "loss"):
            continue
        api = _api_name(event)
        index = counts.get(api, 0)
        counts[api] = index + 1
        direction = "backward" if event.get("phase") == "backward" else "forward"
        name = f"{api}.{index}.{direction}"
        data[name] = {"input_args": [], "input_kwargs": {},
                      "output": [_tensor_entry(o) for o in event["outputs"]]}
        site = event.get("site")
        if site:
            file, _, line = site.rpartition(":")
            stacks[name] = [f"File {Path(root) / file}, line {line}"]
    path = directory / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "level": level, "framework": "pytorch",
                                "dump_data_dir": None, "data": data}, indent=1))
    (directory / "stack.json").write_text(json.dumps(stacks, indent=1))
    return path


def _tensor_entry(summary: dict[str, Any]) -> dict[str, Any]:
    return {"type": "torch.Tensor", "dtype": f"torch.{summary['dtype']}", "shape": summary["shape"],
            "Max": summary.get("Max"), "Min": summary.get("Min"), "Mean": summary.get("Mean"),
            "Norm": summary.get("Norm"), "requires_grad": False}


def read_dump(path: Path) -> list[dict[str, Any]]:
    """msprobe dump.json (and stack.json beside it, if present) -> record events (ops, in file order)."""
    try:
        document = json.loads(Path(path).read_text())
        entries = document["data"]
        if not isinstance(entries, dict):
            raise TypeError("'data' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DumpError(f"{path}: not an msprobe dump.json ({error})") from error
    stacks = _read_stacks(Path(path).with_name("stack.json"))
    events = []
    for seq, (name, entry) in enumerate(entries.items()):
        if not isinstance(entry, dict):
            continue
        match = _NAME.match(name)
        api = match.group("api") if match else name
        outputs = [_summary(t) for t in _tensor_entries(entry.get("output"))]
        if not outputs:
            continue
        frames = stacks.get(name, [])
        events.append({"kind": "op", "name": api, "phase": match.group("direction") if match else "forward",
                       "site": frames[0] if frames else None, "stack": frames, "module": None, "outputs": outputs,
                       "seq": seq, "step": None})
    return events


def dump_level(path: Path) -> str:
    """"aten" for our aten-level dumps (Aten.* names), "api" for msprobe's L0/L1/mix API names."""
    try:
        document = json.loads(Path(path).read_text())
        names = list(document["data"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DumpError(f"{path}: not an msprobe dump.json ({error})") from error
    return "aten" if names and all(name.startswith("Aten.") or name.startswith("Loss.") for name in names) else "api"


def locate(frames: list[str], root: Path) -> str | None:
    """The innermost stack frame whose file is a file of `root` (the device's paths differ from
    ours: the longest tail of the path that names a file under the tree), as "rel/path.py:LINE"."""
    for frame in frames:
        path, _, line = frame.rpartition(":")
        parts = Path(path).parts
        for start in range(len(parts)):
            tail = Path(*parts[start:])
            if (Path(root) / tail).is_file():
                return f"{tail}:{line}"
    return None


def _tensor_entries(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value] if value.get("type") == "torch.Tensor" else []
    if isinstance(value, list):
        return [entry for item in value for entry in _tensor_entries(item)]
    return []


def _summary(entry: dict[str, Any]) -> dict[str, Any]:
    return {"shape": list(entry.get("shape") or []), "dtype": str(entry.get("dtype", "")).removeprefix("torch."),
            "Max": entry.get("Max"), "Min": entry.get("Min"), "Mean": entry.get("Mean"),
            "Norm": entry.get("Norm"), "sample": None}


def _read_stacks(path: Path) -> dict[str, list[str]]:
    """NAME -> the "file:line" of each frame of its call stack, innermost first.

    Two layouts: `{NAME: ["File /p/model.py, line 17, in forward, \n x = self.fc(x)", ...]}` and,
    in newer msprobe (json_writer.write_stack_info_json), `{"0": [[NAME, ...], STACK], ...}` where
    STACK is such a list or those lines joined into one string."""
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    if all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) for v in document.values()):
        document = {name: stack for names, stack in document.values() for name in names}
    frames = {}
    for name, stack in document.items():
        text = "\n".join(map(str, stack)) if isinstance(stack, list) else str(stack)
        frames[name] = [f"{file}:{line}" for file, line in re.findall(r"File (.+?), line (\d+)", text)]
    return frames

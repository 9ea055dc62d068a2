"""The rule data tables (`codemods/data/*.json`): one loader, a schema per table, and a
consistency check across tables.

Every table is read through `read_table`, which checks it against its schema in `SCHEMAS`
and raises `DataError` naming the file and the bad field: a broken table stops the run with
one clear line instead of a KeyError deep inside a rule. The schemas are plain Python values
checked by the small `check` below (no jsonschema at run time: the product must not depend
on a test extra, and checking all the tables costs about 10 ms once per process, against
about 1 ms to parse them: `python bench/data_tables_bench.py`).

    python -m codemods.framework.data --check   # every table: schema + consistency; exit 1 on a problem

Schema language: a Python type (`str`, `int`, `bool`, `list`, `dict`) or a tuple of them
(`(str, None)`: a string or null); `ListOf(spec)`; `MapOf(spec)` (any keys, values of spec);
`OneOf(*values)`; `Record(required, optional)` (an object with those keys and no others).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data"


class DataError(ValueError):
    """A data table that cannot be read or does not match its schema."""


# -- the schema language ------------------------------------------------------------------------

@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    value: Any


@dataclass(frozen=True)
class OneOf:
    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class Record:
    required: dict[str, Any] = field(default_factory=dict)
    optional: dict[str, Any] = field(default_factory=dict)
    known: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "known", self.required | self.optional)


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true/false", list: "a list", dict: "an object",
               type(None): "null"}


def _is(value: Any, kind: type) -> bool:
    if kind is int:  # JSON true/false are not numbers
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check(value: Any, spec: Any, where: str = "") -> list[str]:
    """Problems of `value` against `spec`, each as 'where: what is wrong'."""
    return _check(value, spec, (where,) if where else ())


def _where(path: tuple[Any, ...]) -> str:
    """'entries[3].action' from ('entries', 3, 'action'); built only for a problem."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


def _check(value: Any, spec: Any, path: tuple[Any, ...]) -> list[str]:
    if spec is None:
        spec = type(None)
    if isinstance(spec, type):
        return [] if _is(value, spec) else [f"{_where(path)}: expected {_describe(spec)}, got {json.dumps(value)[:60]}"]
    if isinstance(spec, tuple):  # any of these
        if any(not _check(value, option, path) for option in spec):
            return []
        return [f"{_where(path)}: expected {' or '.join(_describe(option) for option in spec)}, "
                f"got {json.dumps(value)[:60]}"]
    if isinstance(spec, OneOf):
        return [] if value in spec.values else [
            f"{_where(path)}: {json.dumps(value)} is not one of {', '.join(json.dumps(v) for v in spec.values)}"]
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return [f"{_where(path)}: expected a list"]
        return [p for i, item in enumerate(value) for p in _check(item, spec.item, (*path, i))]
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            return [f"{_where(path)}: expected an object"]
        return [p for key, item in value.items() for p in _check(item, spec.value, (*path, key))]
    if isinstance(spec, Record):
        if not isinstance(value, dict):
            return [f"{_where(path)}: expected an object"]
        found = [f"{_where(path)}: missing key {key!r}" for key in spec.required if key not in value]
        known = spec.known
        for key, item in value.items():
            sub = known.get(key, _UNKNOWN)
            if sub is _UNKNOWN:
                found.append(f"{_where(path)}: unknown key {key!r} (known: {', '.join(sorted(known))})")
            elif not (sub is str and type(item) is str):  # the common case, checked without a call
                found += _check(item, sub, (*path, key))
        return found
    raise TypeError(f"not a schema: {spec!r}")


_UNKNOWN = object()


def _describe(spec: Any) -> str:
    if spec is None:
        return "null"
    if isinstance(spec, type):
        return _TYPE_NAMES.get(spec, spec.__name__)
    return {ListOf: "a list", MapOf: "an object", Record: "an object"}.get(type(spec), "a value")


# -- the schemas --------------------------------------------------------------------------------

CODE = str  # "NPU123"; that a rule has it is checked by `codemods.framework.coverage.problems`
STRINGS = ListOf(str)
STRING_MAP = MapOf(str)
SEVERITY = OneOf("info", "warning", "error")
ACTIONS = ("rewrite", "flag", "none")

# one row of docs/coverage.md: a CUDA-side API or pattern and what the rules do with it
ENTRY = Record(
    required={"cuda": str, "action": OneOf(*ACTIONS), "transfer_to_npu": str},
    optional={
        "npu": (str, None),  # the NPU counterpart (a name, or words when there is none to name)
        "code": CODE, "shell_code": CODE,  # the Python rule; the shell-script rule
        "note": str, "message": str, "severity": SEVERITY,
        "members": OneOf("same", "flag"),  # rewrites: members keep their names / are reported
        "match": str,  # how the rule finds it: "name" (default), "type-string", "call", ...
        "kind": str, "also": STRINGS, "at": STRINGS, "when": str, "message_computed": str,
    })
ENTRIES = ListOf(ENTRY)
COVERAGE = Record(required={"description": str, "entries": ENTRIES}, optional={"npu_modules": STRINGS})
_ABOUT = {"about": str, "schema": (str, STRING_MAP), "title": str, "description": str}
DEVICE_POSITIONS = Record(
    optional=_ABOUT | {"entries": ENTRIES, "keywords": STRINGS, "names": STRINGS, "skip_functions": STRINGS,
                       "functions": MapOf(Record(optional={"positions": ListOf(int), "keywords": STRINGS})),
                       "methods": MapOf(ListOf(int))})

SCHEMAS: dict[str, Any] = {
    "alloc_conf.json": Record(
        required={"accepted": MapOf(Record(optional={"in_2_9_7_3": bool, "npu_only": bool})),
                  "translate": STRING_MAP, "not_with_expandable_segments": STRINGS, "entries": ENTRIES},
        optional=_ABOUT),
    "amp.json": Record(
        required={"form": str, "device": str, "entries": ENTRIES, "legacy_gpu": STRING_MAP,
                  "cuda_amp": MapOf(Record(required={"target": str, "device": str},
                                           optional={"positional": (ListOf(str), None)})),
                  "generic": MapOf(Record(required={"position": (int, None), "keyword": str},
                                          optional={"cuda_when_missing": bool}))},
        optional=_ABOUT),
    "api_versions.json": Record(
        required={"apis": MapOf(Record(required={"since": str, "older": (str, None), "source": str},
                                       optional={"names": STRINGS}))},
        optional=_ABOUT),
    "coverage_backends.json": COVERAGE,
    "coverage_devices.json": COVERAGE,
    "coverage_graphs.json": Record(
        required=COVERAGE.required | {"compile_backends": STRING_MAP, "compile_backend_flags": STRING_MAP},
        optional=COVERAGE.optional),
    "coverage_memory.json": COVERAGE,
    "coverage_profiler.json": COVERAGE,
    "coverage_tensors.json": COVERAGE,
    "device_positions.json": DEVICE_POSITIONS,
    "device_positions_extra.json": DEVICE_POSITIONS,
    "device_positions_frameworks.json": DEVICE_POSITIONS,
    "distributed.json": Record(
        required={"backends": STRING_MAP, "devices": STRING_MAP, "keywords": STRINGS, "names": STRINGS,
                  "constants": STRING_MAP, "renames": STRING_MAP, "flags": STRING_MAP, "entries": ENTRIES,
                  "functions": MapOf(Record(required={"position": (int, None), "keyword": str}))},
        optional=_ABOUT),
    "env_vars.json": Record(required={"npu_checks": STRING_MAP, "entries": ENTRIES}, optional=_ABOUT),
    "insertion.json": Record(
        required={"amp_markers": str, "amp_dtypes": STRING_MAP, "transfer_methods": STRINGS,
                  "container_methods": STRINGS, "clip_functions": STRINGS, "not_optimizers": str,
                  "grad_disabling": STRINGS, "builtins": STRINGS, "dataloaders": STRINGS,
                  "loader_wrappers": STRINGS, "dataloader_pin_memory_position": int,
                  "dataloader_num_workers_position": int, "device_like_names": str,
                  "snapshot": MapOf((str, int)), "data_names": str},
        optional=_ABOUT),
    "third_party.json": Record(required={"entries": ENTRIES}, optional=_ABOUT),
    "torch_cuda.json": Record(
        required={"torch_npu_npu_all": MapOf(STRINGS), "excluded_from_rewrite": STRING_MAP,
                  "entries": ENTRIES},
        optional=_ABOUT),
}
# a table without a schema of its own (a new file, a test's temporary table): entries checked,
# other keys free; `problems()` still reports the missing schema
GENERIC = Record(optional={"entries": ENTRIES})


def schema_for(name: str) -> Any:
    """The schema of a table by file name; every `device_positions*.json` shares one (a rule
    family adds its positions in a file of its own); None for a table without one."""
    if name in SCHEMAS:
        return SCHEMAS[name]
    return DEVICE_POSITIONS if name.startswith("device_positions") else None


# -- loading ------------------------------------------------------------------------------------

def _label(path: Path) -> str:
    return f"codemods/data/{path.name}" if path.parent == DATA else str(path)


def read_table(path: Path) -> dict[str, Any]:
    """One table, parsed and checked against its schema; DataError names the file and field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{_label(path)}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{_label(path)}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    schema = schema_for(path.name)
    found = check(data, GENERIC if schema is None else schema)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DataError(f"{_label(path)}: {found[0]}{more}")
    table: dict[str, Any] = data
    return table


@functools.cache
def load_data(name: str) -> dict[str, Any]:
    """A table of `codemods/data`, parsed and checked once per process."""
    return read_table(DATA / name)


def tables(directory: Path = DATA, pattern: str = "*.json") -> list[tuple[Path, dict[str, Any]]]:
    """Every table in `directory` (sorted by name), each checked against its schema."""
    return [(path, read_table(path)) for path in sorted(directory.glob(pattern))]


# -- consistency across tables ------------------------------------------------------------------

def _names(entry: dict[str, Any]) -> list[str]:
    return [entry["cuda"], *entry.get("also", ())]


def contradictions(found: Iterable[tuple[Path, dict[str, Any]]]) -> list[str]:
    """The same CUDA name in two entries that disagree: a rewrite and a flag/"none", or two
    rewrites to different NPU names. Both would act on the same line. (Two entries for one
    name may exist when they agree, e.g. NPU150 and NPU151 rewrite a typed tensor as a name
    and as a type string.) Wildcard entries (`NCCL_*`) are fallbacks: an exact entry wins."""
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    problems = []
    for path, data in found:
        for entry in data.get("entries", ()):
            for name in _names(entry):
                where = f"{path.name} ({entry.get('code') or entry['action']})"
                if name not in seen:
                    seen[name] = (where, entry)
                    continue
                first_where, first = seen[name]
                if first["action"] != entry["action"]:
                    problems.append(f"`{name}`: {first_where} says {first['action']!r}, "
                                    f"{where} says {entry['action']!r}")
                elif entry["action"] == "rewrite" and first.get("npu") != entry.get("npu"):
                    problems.append(f"`{name}`: {first_where} rewrites it to {first.get('npu')!r}, "
                                    f"{where} to {entry.get('npu')!r}")
    return problems


def problems(directory: Path = DATA) -> list[str]:
    """Everything wrong with the tables of `directory`: unreadable or off-schema tables, tables
    without a schema, contradicting entries."""
    found, readable = [], []
    for path in sorted(directory.glob("*.json")):
        if schema_for(path.name) is None:
            found.append(f"{path.name}: no schema in codemods/framework/data.py SCHEMAS")
        try:
            readable.append((path, read_table(path)))
        except DataError as exc:
            found.append(str(exc))
    return found + contradictions(readable)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemods.framework.data",
                                     description="Check the rule data tables against their schemas.")
    parser.add_argument("--check", action="store_true", help="check every table (the default action)")
    parser.add_argument("--directory", type=Path, default=DATA, help="the tables' folder")
    args = parser.parse_args(argv)
    found = problems(args.directory)
    for problem in found:
        print(f"data: {problem}", file=sys.stderr)
    if not found:
        print(f"{len(list(args.directory.glob('*.json')))} tables OK")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

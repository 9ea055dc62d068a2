"""The one loader of every data table of the product (the rules' tables in `codemods/data`, the
wings' own): a small schema language, `check` against it, and `read_table`, which parses a JSON
file and raises `DataError` naming the file and the bad field, so a broken table stops a run with
one clear line instead of a KeyError deep inside the code that reads it.

The schemas are plain Python values (no jsonschema at run time: the product must not depend on
a test extra): a Python type (`str`, `int`, `float`, `bool`, `list`, `dict`) or a tuple of them
(`(str, None)`: a string or null); `ListOf(spec, key=None)` (with `key`, a list of objects told
apart by that field: its values unique, and a problem names the entry by it, `codes[ANA034]`);
`MapOf(spec)` (any keys, values of spec); `OneOf(*values)`; `Pattern(regex, meaning)` (a string
that matches); `Record(required, optional)` (an object with those keys and no others);
`Checked(spec, more)` (spec, then `more(value)` for what a schema cannot say).
A table is JSON, or TOML where its values are pages of text (a literal multi-line string holds
markdown as it reads). A wing declares its folder of tables and their schemas as a `TableSet`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DataError(ValueError):
    """A data table that cannot be read or does not match its schema."""


# -- the schema language ------------------------------------------------------------------------

@dataclass(frozen=True)
class ListOf:
    item: Any
    key: str | None = None  # the field that names each entry, unique in the list


@dataclass(frozen=True)
class Pattern:
    regex: str
    meaning: str  # what a match is, for the message: "an ANA code (ANA and 3 digits)"


@dataclass(frozen=True)
class Checked:
    """`spec`, then `more(value)` once the value matches it: 'where: what' problems of the value
    as a whole (a page template that lacks a field), `where` relative to the value."""

    spec: Any
    more: Callable[[Any], list[str]]


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


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
               dict: "an object", type(None): "null"}
NUMBER = (int, float)  # a JSON number written with or without a fraction


def _is(value: Any, kind: type) -> bool:
    if kind is int:  # JSON true/false are not numbers
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check(value: Any, spec: Any, where: str = "") -> list[str]:
    """Problems of `value` against `spec`, each as 'where: what is wrong'."""
    return _check(value, spec, (where,) if where else ())


class _Entry(str):
    """A list entry named by its key field (`codes[ANA034]`), in a path."""


def _where(path: tuple[Any, ...]) -> str:
    """'entries[3].action' from ('entries', 3, 'action'); built only for a problem."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, (int, _Entry)) else (f".{part}" if text else str(part))
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
        if spec.key is not None:
            return _check_keyed(value, spec, path)
        return [p for i, item in enumerate(value) for p in _check(item, spec.item, (*path, i))]
    if isinstance(spec, Pattern):
        if isinstance(value, str) and re.fullmatch(spec.regex, value):
            return []
        return [f"{_where(path)}: expected {spec.meaning}, got {json.dumps(value)[:60]}"]
    if isinstance(spec, Checked):
        found = _check(value, spec.spec, path)
        prefix = _where(path) + ": " if path else ""
        return found or [prefix + problem for problem in spec.more(value)]
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


def _check_keyed(value: list[Any], spec: ListOf, path: tuple[Any, ...]) -> list[str]:
    """A list of entries named by `spec.key`: each checked under its name, no name twice."""
    found: list[str] = []
    first: dict[str, int] = {}
    for i, item in enumerate(value):
        name = item.get(spec.key) if isinstance(item, dict) else None
        where = (*path, _Entry(name) if isinstance(name, str) and name else i)
        found += _check(item, spec.item, where)
        if isinstance(name, str):
            if name in first:
                found.append(f"{_where(where)}: {spec.key} {json.dumps(name)} again "
                             f"(entries {first[name] + 1} and {i + 1})")
            first.setdefault(name, i)
    return found


def _describe(spec: Any) -> str:
    if spec is None:
        return "null"
    if isinstance(spec, type):
        return _TYPE_NAMES.get(spec, spec.__name__)
    return {ListOf: "a list", MapOf: "an object", Record: "an object"}.get(type(spec), "a value")


def read_table(path: Path, schema: Any, label: str | None = None) -> dict[str, Any]:
    """One JSON (or TOML) table, parsed and checked against `schema`; DataError names the file (as
    `label` says it, else its path) and the first bad field."""
    name = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{name}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise DataError(f"{name}: not UTF-8") from None
    data = _parse_toml(text, name) if path.suffix == ".toml" else _parse_json(text, name)
    found = check(data, schema)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DataError(f"{name}: {found[0]}{more}")
    if not isinstance(data, dict):
        raise DataError(f"{name}: expected an object at the top")
    return data


def _parse_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def _parse_toml(text: str, name: str) -> Any:
    import tomllib  # only where a TOML table is read

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line N, column M)"
        raise DataError(f"{name}: not valid TOML: {exc}") from None


TABLE_SUFFIXES = (".json", ".toml")


@dataclass(eq=False)
class TableSet:
    """A folder of shipped tables and a schema for each, by file name: how a wing declares its
    data (`npu_migrate/<wing>/data_tables.py` holds one as `TABLES`), read once per process through
    `load`, and checked as a whole by `problems` (`python -m npu_migrate.commands.tables --check`)."""

    folder: Path
    schemas: dict[str, Any]
    label: str  # the folder as messages name it: "npu_migrate/analyze/data"
    _loaded: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def read(self, name: str) -> dict[str, Any]:
        """The table `name`, parsed and checked now; DataError names the file and the field."""
        if name not in self.schemas:
            raise DataError(f"{self.label}/{name}: no schema for this table")
        return read_table(self.folder / name, self.schemas[name], f"{self.label}/{name}")

    def load(self, name: str) -> dict[str, Any]:
        """The table `name`, read and checked on first use, then kept."""
        if name not in self._loaded:
            self._loaded[name] = self.read(name)
        return self._loaded[name]

    def problems(self) -> list[str]:
        """A table of the folder without a schema, a schema without its table, a table off its schema."""
        found = [f"{self.label}/{path.name}: no schema for this table"
                 for path in sorted(self.folder.iterdir())
                 if path.suffix in TABLE_SUFFIXES and path.name not in self.schemas]
        for name in sorted(self.schemas):
            try:
                self.read(name)
            except DataError as exc:
                found.append(str(exc))
        return found

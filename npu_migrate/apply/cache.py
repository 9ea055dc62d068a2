"""A content-addressed result cache: an unchanged file under an unchanged tool, rule set and
configuration is not parsed again. An entry is keyed by the digest of the bytes that were
actually migrated (never bytes read again later, which an editor may have changed meanwhile).
One small JSON file per entry, carrying its own checksum (and the new text of a file that
changes beside it), each written atomically, so concurrent runs are safe; an entry that
cannot be read, does not match its checksum, or whose text does not match its recorded size and
SHA-256, is ignored and rebuilt.

The run key covers the tool version and also a fingerprint of the rule and engine sources and of
every plugin (distribution, version and its package files), so an edited rule or an upgraded
plugin never serves stale results, even in an editable install where the version stays put.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from typing import Any

from npu_migrate import __version__
from npu_migrate.apply.outcome import FileOutcome
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity

FORMAT = 3
DEFAULT_DIR = ".npu-migrate-cache"
# the engine modules whose code decides a file's result (besides the rules)
_FINGERPRINT_SUFFIXES = (".py", ".json", ".toml", ".tsv")
_MAX_PLUGIN_FILES = 2000  # a plugin living at the top of a huge folder: hash its module only


def _hash_tree(digest: Any, directory: str, limit: int | None = None) -> bool:
    """Feed every source/data file under `directory` into `digest`; False past `limit` files."""
    count = 0
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(_FINGERPRINT_SUFFIXES):
                continue
            count += 1
            if limit is not None and count > limit:
                return False
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode("utf-8", "surrogateescape"))
            try:
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
            except OSError:
                digest.update(b"<unreadable>")
    return True


def _hash_file(digest: Any, path: str | None) -> None:
    try:
        with open(path or "", "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    except OSError:
        digest.update(b"<no file>")


@lru_cache(maxsize=1)
def tool_fingerprint() -> str:
    """A hash of the rule package and the engine sources (a few ms; once per process)."""
    import codemods

    digest = hashlib.sha256(__version__.encode())
    _hash_tree(digest, os.path.dirname(os.path.abspath(codemods.__file__)))
    here = os.path.dirname(os.path.abspath(__file__))
    for layer in (here, os.path.join(os.path.dirname(here), "core")):  # the apply wing and the core
        _hash_tree(digest, layer)
    return digest.hexdigest()


def plugin_fingerprint() -> list[str]:
    """One line per installed plugin entry point: its name, what it names, its distribution and a
    hash of its package's files, found without importing it (a run served from the cache imports
    no rule). A plugin living at the top of a huge folder is known by its module file only."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    from codemods.api.selectors import ENTRY_POINT_GROUP

    out = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "?"
        digest = hashlib.sha256()
        try:
            spec = find_spec(entry.value.split(":")[0].split(".")[0])  # a top-level name: nothing runs
        except (ImportError, ValueError):
            spec = None
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders or not _hash_tree(digest, folders[0], _MAX_PLUGIN_FILES):
            digest = hashlib.sha256()
            _hash_file(digest, spec.origin if spec is not None else None)
        out.append(f"{entry.name}={entry.value}:{origin}:{digest.hexdigest()[:16]}")
    return sorted(out)


def run_key(codes: list[str], options: dict[str, Any], extra: str = "") -> str:
    """What, besides a file's content, path and project facts, decides its result."""
    material = json.dumps([FORMAT, __version__, tool_fingerprint(), sorted(codes), options,
                           plugin_fingerprint(), extra], sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class Cache:
    """Entries are `<aa>/<digest>.json` (edits, diagnostics, error) and, for a file that
    changes, `<aa>/<digest>.txt` with the new text: raw UTF-8 is read and checked (size and
    SHA-256) several times faster than the same text decoded from a JSON string."""

    def __init__(self, directory: str, key: str) -> None:
        self.directory = directory
        self.key = key
        self.hits = 0
        self.misses = 0
        self._prepared = False

    def _path(self, source_digest: str, path: str, context: str = "") -> str:
        digest = hashlib.sha256(source_digest.encode())
        digest.update(self.key.encode())
        # the path matters: diagnostics name it, and per-file ignores depend on it
        digest.update(path.encode("utf-8", "surrogateescape"))
        # and what the project facts say about the file (`RunPlan.facts_key`)
        digest.update(context.encode())
        name = digest.hexdigest()
        return os.path.join(self.directory, name[:2], name[2:] + ".json")

    def get(self, source_digest: str, path: str, context: str = "") -> FileOutcome | None:
        """The result for a file whose bytes have this `sources.source_digest`, if cached."""
        target = self._path(source_digest, path, context)
        try:
            with open(target, "rb") as handle:
                entry = _checked_entry(handle.read())
            outcome = _outcome_from(entry, path, target)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            self.misses += 1  # missing or corrupt: computed again and overwritten by put()
            return None
        self.hits += 1
        return outcome

    def put(self, source_digest: str, path: str, outcome: FileOutcome, context: str = "") -> None:
        """Store the result of migrating exactly the bytes with this digest."""
        # failures are cached too: the key changes with the tool, so a fixed tool retries them,
        # and an unparseable file is not parsed again on every run
        target = self._path(source_digest, path, context)
        try:
            self._prepare()
            os.makedirs(os.path.dirname(target), exist_ok=True)
            text_info = None
            if outcome.new_text is not None:
                raw = outcome.new_text.encode("utf-8", "surrogatepass")
                text_info = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
                _write_atomic(_text_path(target), raw)  # before the entry that points to it
            entry = _entry_of(outcome, text_info)
            entry["checksum"] = _checksum(entry)
            _write_atomic(target, json.dumps(entry, sort_keys=True).encode("utf-8"))  # a concurrent reader sees all or nothing
        except OSError:
            pass  # a cache that cannot be written only costs time

    def _prepare(self) -> None:
        if not self._prepared:
            self._prepared = True
            prepare_folder(self.directory)


def prepare_folder(directory: str) -> None:
    """Make a cache folder, marked so that git and backup tools leave it alone."""
    os.makedirs(directory, exist_ok=True)
    for name, text in ((".gitignore", "# created by npu-migrate\n*\n"),
                       ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                        "# npu-migrate result cache; safe to delete\n")):
        marker = os.path.join(directory, name)
        if not os.path.exists(marker):
            try:
                with open(marker, "x", encoding="utf-8") as handle:
                    handle.write(text)
            except OSError:
                pass  # another run made it first, or a read-only folder


class FactStore:
    """The project facts' cache (`npu_migrate/apply/facts.py`): each file's summaries and the
    answers of its second looks, under the hash of its content, the question and `salt` (the
    tool, its rules and plugins), so that any shard or later run with the same cache folder
    reuses them. `<dir>/facts/<aa>/<hash>.json`, each carrying its checksum, written atomically."""

    def __init__(self, directory: str, salt: str) -> None:
        self.cache_dir = directory
        self.directory = os.path.join(directory, "facts")
        self.salt = salt
        self._prepared = False

    def key(self, *material: Any) -> str:
        text = json.dumps([FORMAT, self.salt, *material], sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key[2:] + ".json")

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, value) when stored and intact, else (False, None)."""
        try:
            with open(self._path(key), "rb") as handle:
                entry = _checked_entry(handle.read())
            return True, entry["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return False, None

    def put(self, key: str, value: Any) -> None:
        target = self._path(key)
        try:
            if not self._prepared:
                self._prepared = True
                prepare_folder(self.cache_dir)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            entry = {"value": value}
            entry["checksum"] = _checksum(entry)
            _write_atomic(target, json.dumps(entry, sort_keys=True).encode("utf-8", "surrogatepass"))
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written only costs time


def facts_salt() -> str:
    """What besides a file's content decides a fact's summary of it: the tool and the plugins."""
    material = json.dumps([FORMAT, __version__, tool_fingerprint(), plugin_fingerprint()])
    return hashlib.sha256(material.encode()).hexdigest()


def _checksum(entry: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in entry.items() if k != "checksum"}, sort_keys=True)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _checked_entry(raw: bytes) -> Any:
    """An entry carries the SHA-256 of its own content: a torn or bit-rotted entry is a miss."""
    entry = json.loads(raw)
    if not isinstance(entry, dict) or entry.get("checksum") != _checksum(entry):
        raise ValueError("cache entry does not match its checksum")
    return entry


def _text_path(entry_path: str) -> str:
    return entry_path[:-len(".json")] + ".txt"


def _write_atomic(target: str, payload: bytes) -> None:
    import tempfile  # here: a run served from the cache writes nothing

    fd, temp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(temp, target)
    except BaseException:
        _unlink(temp)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _entry_of(outcome: FileOutcome, text_info: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "new_text": text_info,
        "error": outcome.error,
        "edits": [[e.code, e.message, e.line, e.col] for e in outcome.edits],
        "diagnostics": [[d.code, d.message, d.line, d.col, d.severity.value, d.end_line, d.end_col]
                        for d in outcome.diagnostics],
    }


def _read_text(entry_path: str, info: dict[str, Any]) -> str:
    with open(_text_path(entry_path), "rb") as handle:
        raw = handle.read()
    if len(raw) != int(info["size"]) or hashlib.sha256(raw).hexdigest() != info["sha256"]:
        raise ValueError("cached text does not match its entry")
    return raw.decode("utf-8", "surrogatepass")


def _outcome_from(entry: dict[str, Any], path: str, entry_path: str) -> FileOutcome:
    if entry["format"] != FORMAT:
        raise ValueError("old cache format")
    info = entry["new_text"]
    if info is not None and not isinstance(info, dict):
        raise TypeError("bad new_text")
    error = entry.get("error")
    if error is not None and not isinstance(error, str):
        raise TypeError("bad error")
    return FileOutcome(
        path,
        new_text=_read_text(entry_path, info) if info is not None else None,
        error=error,
        edits=[Edit(str(c), str(m), int(line), int(col)) for c, m, line, col in entry["edits"]],
        diagnostics=[Diagnostic(str(c), str(m), path, int(line), int(col), Severity(s),
                                _optional_int(el), _optional_int(ec))
                     for c, m, line, col, s, el, ec in entry["diagnostics"]],
        parsed=False,  # served from the cache: nothing was parsed in this run
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)

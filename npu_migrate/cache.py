"""A content-addressed result cache: an unchanged file under an unchanged tool, rule set and
configuration is not parsed again. One small JSON file per entry, written atomically, so
concurrent runs are safe; an entry that cannot be read is ignored and rebuilt."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any

from npu_migrate import __version__
from npu_migrate.diagnostics import Diagnostic, Edit, Severity
from npu_migrate.engine import FileOutcome

FORMAT = 1
DEFAULT_DIR = ".npu-migrate-cache"


def run_key(codes: list[str], options: dict[str, Any], extra: str = "") -> str:
    """What, besides a file's content, decides its result."""
    from npu_migrate_codemods.registry import all_rules

    plugins = sorted(f"{r.code}:{r.__module__}" for r in all_rules() if not
                     r.__module__.startswith("npu_migrate_codemods."))
    material = json.dumps([FORMAT, __version__, sorted(codes), options, plugins, extra],
                          sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class Cache:
    def __init__(self, directory: str, key: str) -> None:
        self.directory = directory
        self.key = key
        self.hits = 0
        self.misses = 0

    def _path(self, data: bytes, path: str) -> str:
        digest = hashlib.sha256(data)
        digest.update(self.key.encode())
        # the path matters: diagnostics name it, and per-file ignores depend on it
        digest.update(path.encode("utf-8", "surrogateescape"))
        name = digest.hexdigest()
        return os.path.join(self.directory, name[:2], name[2:] + ".json")

    def get(self, data: bytes, path: str) -> FileOutcome | None:
        try:
            with open(self._path(data, path), encoding="utf-8") as handle:
                entry = json.load(handle)
            outcome = _outcome_from(entry, path)
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return outcome

    def put(self, data: bytes, path: str, outcome: FileOutcome) -> None:
        if outcome.error:
            return  # failures are retried next time (the tool may have been fixed)
        target = self._path(data, path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(_entry_of(outcome), handle)
            os.replace(temp, target)
        except OSError:
            pass  # a cache that cannot be written only costs time


def _entry_of(outcome: FileOutcome) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "new_text": outcome.new_text,
        "parsed": outcome.parsed,
        "edits": [[e.code, e.message, e.line, e.col] for e in outcome.edits],
        "diagnostics": [[d.code, d.message, d.line, d.col, d.severity.value, d.end_line, d.end_col]
                        for d in outcome.diagnostics],
    }


def _outcome_from(entry: dict[str, Any], path: str) -> FileOutcome:
    if entry["format"] != FORMAT:
        raise ValueError("old cache format")
    new_text = entry["new_text"]
    if new_text is not None and not isinstance(new_text, str):
        raise TypeError("bad new_text")
    return FileOutcome(
        path,
        new_text=new_text,
        edits=[Edit(str(c), str(m), int(line), int(col)) for c, m, line, col in entry["edits"]],
        diagnostics=[Diagnostic(str(c), str(m), path, int(line), int(col), Severity(s), el, ec)
                     for c, m, line, col, s, el, ec in entry["diagnostics"]],
        parsed=bool(entry["parsed"]),
    )

"""A reference computed once: script mode's reference and noise runs kept on disk and reused by
later `verify` calls (`--reference-store DIR`).

An entry is addressed by its content: the settings that shape the run (script, arguments, steps,
seed, reference device, portable mode, memory measurement, the torch version and the record
format) hash to a folder, and inside it each entry holds the digest of every file of the original
tree it ran on (`manifest.json`). A later call reuses an entry when the original tree's files
still have those digests. Files the runs themselves wrote into the tree (checkpoints, logs) are
listed apart and left out of the comparison, so a run's own output does not spoil its reuse.

Layout: `DIR/<settings hash>/<manifest hash>/{manifest.json, reference.pt, noise-<classes>.pt}`,
and `DIR/stat-cache.json` (path -> size, mtime, digest) so unchanged files are not hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

FORMAT = 2  # the record format: bump when what a run records changes, so old entries are not reused
_SKIPPED_DIRS = {".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def default_root() -> Path:
    """$NPU_MIGRATE_REFERENCE_STORE, else $XDG_CACHE_HOME/npu-migrate/verify-references (~/.cache/...)."""
    explicit = os.environ.get("NPU_MIGRATE_REFERENCE_STORE")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "npu-migrate" / "verify-references"


def _files(tree: Path) -> dict[str, os.stat_result]:
    found = {}
    for folder, dirs, names in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in names:
            path = Path(folder) / name
            try:
                found[str(path.relative_to(tree))] = path.stat()
            except OSError:
                continue
    return found


def _write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(document, handle)
    os.replace(handle.name, path)


class ReferenceStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._stat_cache: dict[str, list[Any]] | None = None

    # --- content ---
    def _digest(self, path: Path, stat: os.stat_result) -> str:
        cache = self._stats()
        known = cache.get(str(path))
        if known and known[0] == stat.st_size and known[1] == stat.st_mtime_ns:
            return str(known[2])
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        cache[str(path)] = [stat.st_size, stat.st_mtime_ns, digest.hexdigest()]
        return digest.hexdigest()

    def _stats(self) -> dict[str, list[Any]]:
        if self._stat_cache is None:
            try:
                self._stat_cache = json.loads((self.root / "stat-cache.json").read_text())
            except (OSError, ValueError):
                self._stat_cache = {}
        return self._stat_cache

    def _flush_stats(self) -> None:
        if self._stat_cache is not None:
            _write_json(self.root / "stat-cache.json", self._stat_cache)

    def snapshot(self, tree: Path) -> dict[str, Any]:
        """The tree's files before a run: (size, mtime) of each, to find what the run wrote."""
        return {name: [stat.st_size, stat.st_mtime_ns] for name, stat in _files(Path(tree)).items()}

    def manifest(self, tree: Path, leave_out: set[str]) -> dict[str, str]:
        tree = Path(tree).resolve()
        digests = {name: self._digest(tree / name, stat) for name, stat in _files(tree).items() if name not in leave_out}
        self._flush_stats()
        return digests

    @staticmethod
    def written(tree: Path, before: dict[str, Any]) -> set[str]:
        """Files created or changed since `before` (a snapshot)."""
        now = {name: [stat.st_size, stat.st_mtime_ns] for name, stat in _files(Path(tree)).items()}
        return {name for name, state in now.items() if before.get(name) != state}

    # --- entries ---
    @staticmethod
    def settings_key(settings: dict[str, Any]) -> str:
        import torch

        document = json.dumps({**settings, "torch": torch.__version__, "format": FORMAT}, sort_keys=True, default=str)
        return hashlib.sha256(document.encode()).hexdigest()[:24]

    def find(self, key: str, tree: Path) -> Path | None:
        """The entry under `key` whose manifest matches the tree as it is now."""
        folder = self.root / key
        if not folder.is_dir():
            return None
        for entry in sorted(folder.iterdir()):
            try:
                stored = json.loads((entry / "manifest.json").read_text())
            except (OSError, ValueError):
                continue
            if self.manifest(tree, set(stored.get("written", []))) == stored.get("files"):
                return entry
        return None

    def create(self, key: str, tree: Path, written: set[str]) -> Path:
        files = self.manifest(tree, written)
        name = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
        entry = self.root / key / name
        _write_json(entry / "manifest.json", {"files": files, "written": sorted(written), "tree": str(tree)})
        return entry

    @staticmethod
    def add_written(entry: Path, written: set[str]) -> None:
        """Files a later run (the noise run) wrote: left out of the manifest from now on."""
        document = json.loads((entry / "manifest.json").read_text())
        extra = written - set(document["written"])
        if extra:
            document["written"] = sorted(set(document["written"]) | extra)
            document["files"] = {k: v for k, v in document["files"].items() if k not in extra}
            _write_json(entry / "manifest.json", document)

    @staticmethod
    def load(path: Path) -> dict[str, Any] | None:
        import torch

        if not path.is_file():
            return None
        try:
            return torch.load(path, weights_only=False)
        except Exception:  # a partly written or foreign file: recompute
            return None

    @staticmethod
    def save(path: Path, result: dict[str, Any]) -> None:
        import torch

        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as handle:
            torch.save(result, handle)
        os.replace(handle.name, path)

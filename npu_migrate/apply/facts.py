"""The project facts of a run: package roots, per-file summaries in the workers, one index per
package root (see `codemods/api/facts.py` for what a fact is).

**Package roots.** A file's package root is the nearest folder at or above it that holds a
`pyproject.toml`, `setup.py`, `setup.cfg`, `npu-migrate.toml` or `.git` and is not itself part of
a Python package (no `__init__.py`: a `setup.py` module is code), searched no higher than
its bound: the folder of the configuration that governs the file, or, for a file under no
configuration (or outside its configuration's folder), the folder the run's unconfigured files
are named from (the working folder, or the folder above their packages). With no marker on the
way, the bound itself is the root. Module names (`pkg.mod`, `mod`) resolve only among the files
of the same package root, so two projects side by side in one tree never change each other's
result.

**The files of a root.** Under a configuration, every file of the root's folder (as discovery
finds it with the configuration's excludes), whatever subset the run migrates (pre-commit passes
only the staged files); under none, the files the run found in that root.

**Cost.** A run (or a shard) builds the indexes of the roots its own files lie in, and only for
the facts its selected rules declare. Each file of those roots is read once (the run's bounded,
non-blocking reader) and summarized in the worker processes: cheap byte tests first, an `ast`
parse shared by every fact that needs it only past them; a summary that needed the parse is
cached under the hash of the file's content, so another shard or a later run with the same cache
folder reuses it. The merge then runs in the parent, per root; the few second looks it asks for
are cached the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from codemods.api.facts import Analysis, NeedsTree, Project, ProjectFact, SourceFile, suffix_of, summarize
from npu_migrate.apply.cache import FactStore
from npu_migrate.apply.files import read_or_none
from npu_migrate.core.config import Settings, SettingsFinder
from npu_migrate.core.discovery import discover
from npu_migrate.core.parallel import ordered_map
from npu_migrate.core.sources import source_digest

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "npu-migrate.toml", ".git")


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class PackageRoots:
    """The package root of each file (see the module docstring); each folder is looked at once."""

    def __init__(self, unconfigured_bound: str) -> None:
        self.unconfigured_bound = os.path.abspath(unconfigured_bound)
        self._marked: dict[str, bool] = {}
        self._roots: dict[tuple[str, str], str] = {}
        self._by_folder: dict[tuple[str, int], str] = {}  # (folder as named, settings) -> root

    def bound(self, path: str, settings: Settings) -> str:
        if settings.source:
            root = os.path.abspath(settings.root)
            if inside(os.path.abspath(path), root):
                return root
        return self.unconfigured_bound

    def of(self, path: str, settings: Settings) -> str:
        named = (os.path.dirname(path), id(settings))  # the files of a folder share their root
        if named not in self._by_folder:
            self._by_folder[named] = self._of(path, settings)
        return self._by_folder[named]

    def _of(self, path: str, settings: Settings) -> str:
        absolute = os.path.abspath(path)
        bound = self.bound(absolute, settings)
        folder = os.path.dirname(absolute)
        if not inside(folder, bound):
            return bound
        key = (folder, bound)
        if key not in self._roots:
            self._roots[key] = self._search(folder, bound)
        return self._roots[key]

    def _search(self, folder: str, bound: str) -> str:
        while True:
            if self._has_marker(folder) or folder == bound:
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                return bound
            folder = parent

    def _has_marker(self, folder: str) -> bool:
        """A marker in a folder that is not itself part of a Python package (a `setup.py` module
        inside a package, as Lightning's `trainer/setup.py`, is code, not a project)."""
        if folder not in self._marked:
            self._marked[folder] = not os.path.lexists(os.path.join(folder, "__init__.py")) and any(
                os.path.lexists(os.path.join(folder, m)) for m in MARKERS)
        return self._marked[folder]


def unconfigured_bound(files: Sequence[str]) -> str:
    """What files under no configuration are a project of: the working folder when they lie in
    it, else the folder holding them all, above any package (`apply /elsewhere/project` from
    another folder), so their module names (`pkg.kernels`) and so the project facts do not
    depend on where the run was started."""
    here = os.path.abspath(".")
    if all(not os.path.isabs(f) and not f.startswith(os.pardir) for f in files):
        return here  # named from here (discovery gives normalized paths)
    paths = [os.path.abspath(f) for f in files]
    if all(inside(p, here) for p in paths):
        return here
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    while os.path.isfile(os.path.join(root, "__init__.py")) and os.path.dirname(root) != root:
        root = os.path.dirname(root)  # a package's files are named from the folder above it
    return root


_MISS: Any = object()
_ROOT = "\\u0000root/"  # the root's path in a stored index (as JSON text: no real path holds a NUL)


class _Changed(Exception):
    """A file whose content changed between its summary and a second look at it."""


class RunFacts:
    """The project facts of one run. `build({root: facts})` summarizes the files of those roots
    (in `jobs` worker processes, through `store` when given) and merges one index per fact and
    root: `{root: {fact.key: index}}` (empty indexes left out)."""

    def __init__(self, roots: PackageRoots, finder: SettingsFinder, exclude: Sequence[str],
                 run_files: dict[str, str], store: FactStore | None, jobs: int | None, limit: int) -> None:
        self.roots, self.finder, self.exclude = roots, finder, list(exclude)
        self._run_members: dict[str, list[str]] = {}  # root -> the run's files in it
        for file, root in run_files.items():
            self._run_members.setdefault(root, []).append(os.path.abspath(file))
        self.store, self.jobs, self.limit = store, jobs, limit
        self.digests: dict[str, str] = {}
        self.summaries: dict[str, dict[str, Any]] = {}
        self._discovered: dict[tuple[str, tuple[str, ...]], dict[str, list[str]]] = {}
        self.files_summarized = 0

    def files_of(self, root: str, suffixes: tuple[str, ...]) -> list[str]:
        """The files of a package root (absolute paths) with these suffixes: under a configuration
        all of its folder's, else the run's (`run_files`: each file the run found, with its root)."""
        settings = self.finder.for_path(root)
        if not (settings.source and inside(root, os.path.abspath(settings.root))):
            return [f for f in self._run_members.get(root, ()) if f.endswith(suffixes)]
        key = (os.path.abspath(settings.root), suffixes)
        if key not in self._discovered:
            members: dict[str, list[str]] = {}
            for file in discover([settings.root], [*self.exclude, *settings.exclude], suffixes,
                                 settings.respect_gitignore, root=settings.root):
                members.setdefault(self.roots.of(file, self.finder.for_path(file)), []).append(os.path.abspath(file))
            self._discovered[key] = members
        return self._discovered[key].get(root, [])

    def build(self, wanted: dict[str, tuple[ProjectFact, ...]]) -> dict[str, dict[str, Any]]:
        """Each file of the wanted roots is read and hashed (in the workers), with the summaries of
        the facts whose index must be merged every time; a root whose files are all unchanged
        since a run stored its index (`ProjectFact.merges_from_summaries`) takes it from the store,
        the others are summarized for those facts too, merged and stored."""
        members: dict[str, list[str]] = {}
        every: dict[str, ProjectFact] = {}
        for root, facts in wanted.items():
            every.update((fact.key, fact) for fact in facts)
            members[root] = self.files_of(root, tuple(sorted({s for fact in facts for s in fact.suffixes})))
        self._summarize(every, {root: [f for f in facts if not self._stored(f)] for root, facts in wanted.items()},
                        members)
        built: dict[str, dict[str, Any]] = {}
        missing: dict[str, list[ProjectFact]] = {}
        for root, facts in wanted.items():
            for fact in facts:
                if self._stored(fact) and (index := self._stored_index(fact, root, members[root])) is not _MISS:
                    if index:
                        built.setdefault(root, {})[fact.key] = index
                else:
                    missing.setdefault(root, []).append(fact)
        self._summarize(every, {root: [f for f in todo if self._stored(f)] for root, todo in missing.items()},
                        members)
        for root, todo in missing.items():
            project = Project(root, members[root], self.summaries, self._read_unchanged, self._answer)
            for fact in todo:
                index = fact.merge(project)
                if self._stored(fact):
                    self._store_index(fact, root, members[root], index)
                if index:
                    built.setdefault(root, {})[fact.key] = index
        return built

    def _stored(self, fact: ProjectFact) -> bool:
        return self.store is not None and fact.merges_from_summaries

    def _summarize(self, every: dict[str, ProjectFact], facts_of: dict[str, list[ProjectFact]],
                   members: dict[str, list[str]]) -> None:
        """Read and hash the files of the roots of `facts_of` (once per run), with these facts'
        summaries; the parses they need in the workers."""
        tasks: dict[str, set[str]] = {}  # file -> keys of the facts to summarize it for
        for root, facts in facts_of.items():
            for path in members[root]:
                keys = tasks.setdefault(path, set())
                keys.update(fact.key for fact in facts if path.endswith(fact.suffixes))
        items = [(path, tuple(sorted(keys))) for path, keys in sorted(tasks.items())
                 if keys or path not in self.digests]
        store = (self.store.cache_dir, self.store.salt) if self.store is not None else None
        initargs = (list(every.values()), self.limit, store)
        # reading, hashing, the byte tests and the store are cheaper here than the start of
        # workers; only the files whose summary needs a parse not stored yet go to them
        _init_summary_worker(*initargs)
        parses: list[tuple[str, str, tuple[str, ...]]] = []
        for path, wanted in items:
            self.files_summarized += 1
            digest, found, needs = _byte_summary(path, wanted)
            if digest is None:
                continue
            self.digests[path] = digest
            self.summaries.setdefault(path, {}).update(found)
            if needs:
                parses.append((path, digest, needs))
        for (path, _, _), answered in zip(parses, ordered_map(_parsed_summary, _parsed_summary, parses,
                                                                self.jobs, _init_summary_worker, initargs)):
            if answered is None:  # edited since it was hashed: it says nothing this time
                del self.digests[path], self.summaries[path]
            else:
                self.summaries[path].update(answered)

    def _index_key(self, fact: ProjectFact, root: str, members: list[str]) -> str:
        assert self.store is not None
        files = sorted((os.path.relpath(p, root), self.digests.get(p)) for p in members if p.endswith(fact.suffixes))
        return self.store.key("index", fact.key, fact.version, files)

    def _stored_index(self, fact: ProjectFact, root: str, members: list[str]) -> Any:
        assert self.store is not None
        hit, text = self.store.get(self._index_key(fact, root, members))
        if not hit or not isinstance(text, str):
            return _MISS
        return json.loads(text.replace(_ROOT, json.dumps(os.path.join(root, ""))[1:-1]))

    def _store_index(self, fact: ProjectFact, root: str, members: list[str], index: Any) -> None:
        """Stored with the root's own path left out: a cache moved with its checkout stays valid."""
        assert self.store is not None
        text = json.dumps(index, sort_keys=True).replace(json.dumps(os.path.join(root, ""))[1:-1], _ROOT)
        self.store.put(self._index_key(fact, root, members), text)

    def _read_unchanged(self, path: str) -> bytes | None:
        data = read_or_none(path, self.limit)
        if data is not None and path in self.digests and source_digest(data) != self.digests[path]:
            raise _Changed(path)
        return data

    def _answer(self, path: str, analysis: Analysis, args: tuple[Any, ...], compute: Any) -> Any:
        """A second look at a file (`Project.analyse`), from the store when it answered before."""
        digest = self.digests.get(path)
        key = None
        if digest is not None and self.store is not None:
            key = self.store.key("answer", digest, f"{analysis.__module__}.{analysis.__qualname__}", args)
            hit, value = self.store.get(key)
            if hit:
                return value
        try:
            value = compute()
        except _Changed:
            return None  # edited during the run: it says nothing this time, and nothing is stored
        if key is not None:
            assert self.store is not None
            self.store.put(key, value)
        return value


# -- worker side -------------------------------------------------------------------------------
_FACTS: dict[str, ProjectFact] = {}
_LIMIT = 0
_STORE: FactStore | None = None


def _init_summary_worker(facts: list[ProjectFact], limit: int, store: tuple[str, str] | None) -> None:
    global _LIMIT, _STORE
    _FACTS.clear()
    _FACTS.update({fact.key: fact for fact in facts})
    _LIMIT = limit
    _STORE = FactStore(*store) if store is not None else None


def _byte_summary(path: str, keys: tuple[str, ...]) -> tuple[str | None, dict[str, Any], tuple[str, ...]]:
    """(content digest, {fact key: summary}, keys of the facts left for a parse) of one file;
    digest None when it cannot be read. The byte tests of every fact run first; the facts that
    need the tree are answered from the store, else left for `_parsed_summary`."""
    data = read_or_none(path, _LIMIT)
    if data is None:
        return None, {}, ()
    digest = source_digest(data)
    source = SourceFile(data, suffix_of(path), may_parse=False)
    found: dict[str, Any] = {}
    needs: list[str] = []
    for key in keys:
        try:
            summary = _FACTS[key].summarize(source)
        except NeedsTree:
            needs.append(key)
            continue
        if summary is not None:
            found[key] = summary
    if needs and _STORE is not None:
        hit, answered = _STORE.get(_summary_key(digest, needs))
        if hit:
            found.update(answered or {})
            needs = []
    return digest, found, tuple(needs)


def _parsed_summary(item: tuple[str, str, tuple[str, ...]]) -> dict[str, Any] | None:
    """The summaries of the facts that need the tree, from one shared parse of the file read
    again (its bytes stay out of the queue to the workers); stored. None when the file no longer
    has the content it was hashed with."""
    path, digest, needs = item
    data = read_or_none(path, _LIMIT)
    if data is None or source_digest(data) != digest:
        return None
    answered = summarize([_FACTS[key] for key in needs], SourceFile(data, suffix_of(path)))
    if _STORE is not None:
        _STORE.put(_summary_key(digest, needs), answered)
    return answered or {}


def _summary_key(digest: str, needs: Sequence[str]) -> str:
    assert _STORE is not None
    return _STORE.key("summary", digest, [(key, _FACTS[key].version) for key in needs])

"""Runs the engine over many files: cache first, then the misses on all cores, results streamed
back in a deterministic order so memory stays bounded whatever the size of the repository."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codemods.api.facts import ProjectFact
from npu_migrate.apply.cache import Cache
# the per-file limit lives with the run's reader; callers still import it from here too
from npu_migrate.apply.files import MAX_FILE_BYTES as MAX_FILE_BYTES
from npu_migrate.apply.files import MAX_FILE_BYTES_VARIABLE as MAX_FILE_BYTES_VARIABLE
from npu_migrate.apply.files import TooBig, default_max_file_bytes, read_bounded, read_error
from npu_migrate.apply.outcome import FileOutcome
from npu_migrate.core.discovery import excluded
from npu_migrate.core.parallel import ignore_interrupts, ordered_map
from npu_migrate.core.sources import (
    Skipped,
    SourceError,
    SourceText,
    decode_source,
    remove_stale_temps,
    source_digest,
    write_if_unchanged,
)

if TYPE_CHECKING:
    from npu_migrate.apply.engine import RuleSet


@dataclass
class RunPlan:
    """Everything a worker needs to rebuild the rule sets (picklable). `facts` holds the index of
    each project fact the rules declared, per package root (`npu_migrate/apply/facts.py`), and
    `file_roots` the package root of each file of the run; a file's rules see the indexes of its
    own root in their options."""

    codes: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    root: str = "."
    max_file_bytes: int = field(default_factory=lambda: default_max_file_bytes())
    file_suffixes: tuple[str, ...] | None = None  # what the selected rules read (None: ask them)
    project_facts: tuple[ProjectFact, ...] = ()
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    file_roots: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rulesets: dict[tuple[frozenset[str], str | None], RuleSet] = {}
        self._slices: dict[tuple[str, str], str] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rulesets"] = {}
        state["_slices"] = {}
        return state

    def ignored_for(self, path: str) -> frozenset[str]:
        if not self.per_file_ignores:
            return frozenset()
        relative = os.path.relpath(os.path.abspath(path), self.root)
        found: set[str] = set()
        for pattern, codes in self.per_file_ignores.items():
            if excluded(relative, [pattern]):
                found.update(codes)
        return frozenset(found)

    def clear_rulesets(self) -> None:
        """Forget the rule sets built so far (built before the facts, they carry none)."""
        self._rulesets.clear()

    def ruleset_for(self, path: str) -> RuleSet:
        ignored = self.ignored_for(path)
        package_root = self.file_roots.get(os.path.abspath(path)) if self.facts else None
        if package_root not in self.facts:
            package_root = None  # no fact says anything about this root: the plain rule set
        ruleset = self._rulesets.get((ignored, package_root))
        if ruleset is None:
            from codemods.api.registry import all_rules
            from codemods.api.selectors import SWITCHED_OFF
            from npu_migrate.apply.engine import RuleSet

            by_code = {r.code: r for r in all_rules()}
            rules = [by_code[c] for c in self.codes
                     if not any(c.startswith(i.upper()) for i in ignored)]
            options = {**self.options, **self.facts.get(package_root or "", {})}
            off = sorted(set(options.get(SWITCHED_OFF, ())) | {c for c in self.codes if by_code[c] not in rules})
            if off:  # a rule switched off for this file is a decision the NPU599 sweep respects
                options[SWITCHED_OFF] = off
            ruleset = self._rulesets[(ignored, package_root)] = RuleSet(rules, options)
        return ruleset

    def suffixes(self) -> tuple[str, ...]:
        """The file suffixes the selected rules have something to say about."""
        return self.file_suffixes if self.file_suffixes is not None else self.ruleset_for("").suffixes()

    def facts_key(self, path: str) -> str:
        """A digest of what the project facts say that the result of `path` depends on (part of
        its cache key): the slice of each fact's index of its package root, with the root's own
        path left out, so that a cache moved with its checkout stays valid."""
        package_root = self.file_roots.get(os.path.abspath(path)) if self.file_roots else None
        indexes = self.facts.get(package_root or "")
        if not indexes:
            return ""
        assert package_root is not None
        digest = hashlib.sha256()
        for fact in self.project_facts:
            index = indexes.get(fact.key)
            if not index:
                continue
            part = fact.slice(index, path)
            if part is index:  # the whole index: the same for every file of the root
                memo = (package_root, fact.key)
                if memo not in self._slices:
                    self._slices[memo] = _portable(part, package_root)
                text = self._slices[memo]
            else:
                text = _portable(part, package_root)
            digest.update(f"{fact.key}\0{text}\0".encode("utf-8", "surrogatepass"))
        return digest.hexdigest()


def _portable(value: Any, package_root: str) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text.replace(json.dumps(package_root + os.sep)[1:-1], "")


@dataclass
class FileResult:
    outcome: FileOutcome
    old_text: str | None = None  # set only when the file changes (for diffs)
    new_bytes: bytes | None = None  # the encoded new content, when the file changes
    cached: bool = False
    digest: str | None = None  # `source_digest` of the bytes that were migrated

    @property
    def path(self) -> str:
        return self.outcome.path


def process_bytes(data: bytes, path: str, plan: RunPlan) -> FileResult:
    digest = source_digest(data)
    try:
        source = decode_source(data, path)
    except SourceError as exc:
        return FileResult(FileOutcome(path, error=str(exc)), digest=digest)
    from npu_migrate.apply.engine import migrate_text  # LibCST and the rules: only for a file to migrate

    try:
        outcome = migrate_text(source.text, path, plan.ruleset_for(path))
    except RecursionError:
        return FileResult(FileOutcome(path, error=f"{path}:0:0: too deeply nested to parse"), digest=digest)
    return _finish(outcome, source, digest)


def _finish(outcome: FileOutcome, source: SourceText, digest: str) -> FileResult:
    if outcome.new_text is None:
        return FileResult(outcome, digest=digest)
    try:
        new_bytes = source.encode(outcome.new_text)
    except UnicodeEncodeError as exc:
        outcome.new_text = None
        outcome.error = f"{outcome.path}:0:0: the rewrite cannot be encoded as {source.encoding}: {exc.reason}"
        return FileResult(outcome, digest=digest)
    return FileResult(outcome, source.text, new_bytes, digest=digest)


def write_back(result: FileResult, destination: str | None = None) -> bool:
    """Write a changed file, if it still holds the bytes that were migrated (a copy under
    `--output-dir` is written whatever it holds). On failure the result becomes a failed file
    whose error says why (changed or deleted during the run, read-only folder, full disk)."""
    assert result.new_bytes is not None
    if destination is None:
        problem = write_if_unchanged(result.path, result.new_bytes, result.digest)
    else:
        problem = write_if_unchanged(destination, result.new_bytes, None, keep_read_only=False)
    if problem is None:
        return True
    outcome = result.outcome
    outcome.error, outcome.new_text, outcome.edits = problem, None, []
    result.new_bytes = result.old_text = None
    return False


def clean_stale_temps(paths: Sequence[str]) -> int:
    """Remove what runs killed mid-write left in the folders of `paths` (see sources)."""
    return remove_stale_temps(os.path.dirname(p) for p in paths)


def _release_memory() -> None:
    """Give a big tree's memory back to the system: freed memory otherwise stays in the
    worker (glibc keeps its arenas), and two workers that each held one big file add up."""
    import ctypes  # here: a run served from the cache never trims

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read(path: str, limit: int = 0) -> bytes | FileResult:
    try:
        return read_bounded(path, limit)
    except Skipped as exc:
        return FileResult(FileOutcome(path, note=str(exc)))
    except (TooBig, OSError) as exc:
        return FileResult(FileOutcome(path, error=read_error(path, exc)))


# -- worker side ----------------------------------------------------------------------------
_PLAN: RunPlan | None = None
_BIG_FILE_LOCK: Any = None
# LibCST needs about 350 bytes of memory per byte of source it parses; files above this size are
# parsed one at a time across the pool, so two of them never make a peak together
BIG_FILE_BYTES = 256 * 1024


def _init_worker(plan: RunPlan, big_file_lock: Any = None) -> None:
    global _PLAN, _BIG_FILE_LOCK
    ignore_interrupts()
    _PLAN = plan
    _BIG_FILE_LOCK = big_file_lock


def _work(path: str) -> FileResult:
    assert _PLAN is not None
    if _BIG_FILE_LOCK is not None and _size(path) > BIG_FILE_BYTES:
        with _BIG_FILE_LOCK:
            data = _read(path, _PLAN.max_file_bytes)
            result = data if isinstance(data, FileResult) else process_bytes(data, path, _PLAN)
            _release_memory()
            return result
    data = _read(path, _PLAN.max_file_bytes)
    return data if isinstance(data, FileResult) else process_bytes(data, path, _PLAN)


# -- parent side ----------------------------------------------------------------------------
def run(paths: Sequence[str], plan: RunPlan, jobs: int | None = None,
        cache: Cache | None = None) -> Iterator[FileResult]:
    """Yield one FileResult per path, in the order given."""
    pending: list[tuple[int, str]] = []
    ready: dict[int, FileResult] = {}
    reload: set[int] = set()
    for index, path in enumerate(paths):
        if cache is None:
            pending.append((index, path))
            continue
        data = _read(path, plan.max_file_bytes)
        if isinstance(data, FileResult):
            ready[index] = data
            continue
        digest = source_digest(data)
        hit = cache.get(digest, path, plan.facts_key(path))
        if hit is None:
            pending.append((index, path))
        elif hit.new_text is None:
            ready[index] = FileResult(hit, cached=True, digest=digest)  # small: edits and diagnostics only
        else:
            # a file that changes: its texts are fetched again when its turn comes, so that a
            # warm run does not hold every changed file's old and new text at once
            reload.add(index)
    computed = _compute([p for _, p in pending], plan, jobs)
    pending_index = iter(pending)
    next_pending = next(pending_index, None)
    for index, path in enumerate(paths):
        if next_pending is not None and next_pending[0] == index:
            result = next(computed)
            if cache is not None and result.digest is not None:
                # under the bytes that were migrated, never the file's bytes now: an edit made
                # meanwhile must not be paired with a result computed without it
                cache.put(result.digest, path, result.outcome, plan.facts_key(path))
            next_pending = next(pending_index, None)
            yield result
        elif index in reload:
            assert cache is not None
            yield _reload(path, plan, cache)
        else:
            yield ready.pop(index)


def _reload(path: str, plan: RunPlan, cache: Cache) -> FileResult:
    data = _read(path, plan.max_file_bytes)
    if isinstance(data, FileResult):
        return data
    digest = source_digest(data)
    hit = cache.get(digest, path, plan.facts_key(path))
    if hit is not None:
        return _from_cache(hit, data, path, digest)
    result = process_bytes(data, path, plan)  # edited (or evicted) since the first look
    cache.put(digest, path, result.outcome, plan.facts_key(path))
    return result


def _from_cache(outcome: FileOutcome, data: bytes, path: str, digest: str) -> FileResult:
    if outcome.new_text is None:
        return FileResult(outcome, cached=True, digest=digest)
    result = _finish(outcome, decode_source(data, path), digest)
    result.cached = True
    return result


def _compute(paths: list[str], plan: RunPlan, jobs: int | None) -> Iterator[FileResult]:
    def here(path: str) -> FileResult:
        data = _read(path, plan.max_file_bytes)
        return data if isinstance(data, FileResult) else process_bytes(data, path, plan)

    if not paths:  # every file served from the cache
        return iter(())
    import multiprocessing  # here: a run served from the cache starts no worker

    lock = multiprocessing.get_context().Lock()
    return ordered_map(_work, here, paths, jobs, _init_worker, (plan, lock))

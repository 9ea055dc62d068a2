"""Runs the engine over many files: cache first, then the misses on all cores, results streamed
back in a deterministic order so memory stays bounded whatever the size of the repository."""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from npu_migrate.apply.cache import Cache
from npu_migrate.apply.engine import SWITCHED_OFF, FileOutcome, RuleSet, migrate_text
from npu_migrate.core.discovery import excluded
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX
from npu_migrate.core.parallel import ignore_interrupts, ordered_map
from npu_migrate.core.sources import (
    Skipped,
    SourceError,
    SourceText,
    decode_source,
    read_regular,
    remove_stale_temps,
    source_digest,
    write_if_unchanged,
)

# LibCST needs about 350 bytes of memory and, for code dense in CUDA uses, up to 50 us of CPU
# per byte it parses: a file above this size is an error (left untouched), not an hour-long run
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_FILE_BYTES_VARIABLE = "NPU_MIGRATE_MAX_FILE_BYTES"
# notebooks carry their outputs (images, tables): only the code cells reach LibCST (issue 14)
NOTEBOOK_LIMIT_FACTOR = 16


def default_max_file_bytes() -> int:
    """`MAX_FILE_BYTES`, or the environment's `NPU_MIGRATE_MAX_FILE_BYTES` (0: no limit)."""
    value = os.environ.get(MAX_FILE_BYTES_VARIABLE, "").strip()
    return int(value) if value.isdigit() else MAX_FILE_BYTES


@dataclass
class RunPlan:
    """Everything a worker needs to rebuild the rule sets (picklable)."""

    codes: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    root: str = "."
    max_file_bytes: int = field(default_factory=lambda: default_max_file_bytes())

    def __post_init__(self) -> None:
        self._rulesets: dict[frozenset[str], RuleSet] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rulesets"] = {}
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

    def ruleset_for(self, path: str) -> RuleSet:
        ignored = self.ignored_for(path)
        ruleset = self._rulesets.get(ignored)
        if ruleset is None:
            from codemods.api.registry import all_rules

            by_code = {r.code: r for r in all_rules()}
            rules = [by_code[c] for c in self.codes
                     if not any(c.startswith(i.upper()) for i in ignored)]
            off = sorted(set(self.options.get(SWITCHED_OFF, ())) | {c for c in self.codes if by_code[c] not in rules})
            ruleset = self._rulesets[ignored] = RuleSet(rules, {**self.options, SWITCHED_OFF: off} if off else self.options)
        return ruleset


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
    if limit and path.endswith(NOTEBOOK_SUFFIX):
        limit *= NOTEBOOK_LIMIT_FACTOR  # a notebook's outputs are read as JSON, never parsed as code
    try:
        if limit and (size := os.lstat(path).st_size) > limit:
            return FileResult(FileOutcome(path, error=(
                f"{path}:0:0: {size / 2**20:.1f} MiB is over the per-file limit of {limit / 2**20:.1f} MiB; "
                f"left untouched (raise it with {MAX_FILE_BYTES_VARIABLE}=<bytes>)")))
        return read_regular(path)
    except Skipped as exc:
        return FileResult(FileOutcome(path, note=str(exc)))
    except OSError as exc:
        return FileResult(FileOutcome(path, error=f"{path}:0:0: cannot read: {exc.strerror}"))


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
        hit = cache.get(digest, path)
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
                cache.put(result.digest, path, result.outcome)
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
    hit = cache.get(digest, path)
    if hit is not None:
        return _from_cache(hit, data, path, digest)
    result = process_bytes(data, path, plan)  # edited (or evicted) since the first look
    cache.put(digest, path, result.outcome)
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

    lock = multiprocessing.get_context().Lock()
    return ordered_map(_work, here, paths, jobs, _init_worker, (plan, lock))

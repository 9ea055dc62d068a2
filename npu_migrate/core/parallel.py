"""Per-file work on all cores, results streamed back in input order (deterministic output,
bounded memory). Shared by `apply` and `analyze`."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# below this many items a process pool costs more than it saves
POOL_THRESHOLD = 24


def ignore_interrupts() -> None:
    """For workers: the parent handles Ctrl-C and stops cleanly between files."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def ordered_map(in_worker: Callable[[T], R], here: Callable[[T], R], items: Sequence[T], jobs: int,
                initializer: Callable[..., None], initargs: tuple[Any, ...] = ()) -> Iterator[R]:
    """`here(item)` in this process for small runs, else `in_worker(item)` on `jobs` processes
    set up by `initializer(*initargs)`; either way one result per item, in order."""
    if jobs <= 1 or len(items) < POOL_THRESHOLD:
        yield from map(here, items)
        return
    executor = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(),
                                   initializer=initializer, initargs=initargs)
    try:
        # large files first would balance better, but the order must stay deterministic
        yield from executor.map(in_worker, items, chunksize=max(1, min(16, len(items) // (jobs * 8))))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)

"""Per-file work on all cores, results streamed back in input order (deterministic output,
bounded memory). Shared by `apply` and `analyze`.

Stopping is the parent's job: workers ignore SIGINT, SIGTERM and SIGHUP (a Ctrl-C or a CI
cancel reaches the whole process group), the parent stops between files and kills its workers,
and a worker whose parent died (SIGKILL, OOM killer) exits by itself, so no orphan keeps the
job's output pipes open.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

# below this many items a process pool costs more than it saves
POOL_THRESHOLD = 24
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PARENT_POLL_SECONDS = 0.5
# The cyclic collector's thresholds during a run. A run allocates millions of short-lived tree
# nodes (ast and LibCST) and frees them by reference counting; at CPython's default (700, 10, 10)
# the collector starts ~27,000 times over torch's 2,285 files and takes a fifth of the CPU
# scanning live trees. At these it starts ~220 times for the same memory freed
# (`python bench/engine_bench.py`, "gc" in the notes of bench/README.md).
RUN_GC_THRESHOLDS = (50_000, 50, 100)


class Stopped(KeyboardInterrupt):
    """A stop signal reached the main process; `signum` gives the exit status 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal number, as a shell reports a process killed by that signal."""
    return 128 + getattr(interrupt, "signum", signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """In the main process: SIGTERM and SIGHUP stop the run like Ctrl-C (raise `Stopped`).
    Only the first signal raises: a second one during the clean-up must not cut it short.
    A signal the process was started ignoring stays ignored: `nohup` (SIGHUP) and a background
    job of a script (SIGINT) ask for a run that the terminal going away cannot stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def ignore_interrupts() -> None:
    """For workers: the parent handles stop signals, stops cleanly between files and kills
    its workers; a worker also exits when its parent dies without doing so."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _die_with_parent()


_watching = False


def _die_with_parent() -> None:
    global _watching
    if _watching:
        return
    _watching = True
    parent = os.getppid()
    import ctypes

    try:  # Linux: the kernel kills this process when the parent dies
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watcher below is enough
    if os.getppid() != parent:  # died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def collect_less_often() -> None:
    """Set the run's collector thresholds in this process (a command's or a worker's)."""
    gc.set_threshold(*RUN_GC_THRESHOLDS)


def _start_worker(initializer: Callable[..., None], *initargs: Any) -> None:
    ignore_interrupts()
    collect_less_often()  # a spawned worker does not inherit the parent's thresholds
    initializer(*initargs)


def worker_count(jobs: int | None, items: int) -> int:
    """`jobs` (default: all cores), never more than the cores this process may use nor the
    number of items: `-j 64` on 2 cores would only add start-up time and memory."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(jobs or cores, cores, items))


def ordered_map(in_worker: Callable[[T], R], here: Callable[[T], R], items: Sequence[T], jobs: int | None,
                initializer: Callable[..., None], initargs: tuple[Any, ...] = ()) -> Iterator[R]:
    """`here(item)` in this process for small runs, else `in_worker(item)` on `jobs` processes
    set up by `initializer(*initargs)`; either way one result per item, in order."""
    jobs = worker_count(jobs, len(items))
    if jobs <= 1 or len(items) < POOL_THRESHOLD:
        yield from map(here, items)
        return
    # imported here: they cost more than a small or cached run's whole work
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    executor = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(),
                                   initializer=_start_worker, initargs=(initializer, *initargs))
    finished = False
    try:
        # large files first would balance better, but the order must stay deterministic
        results = executor.map(in_worker, items, chunksize=max(1, min(16, len(items) // (jobs * 8))))
        for count, result in enumerate(results, 1):
            if count == len(items):
                # every result is in: end the pool now, as a consumer that takes exactly as many
                # results as it gave items never resumes this generator after the last one (its
                # closing would otherwise count as a stop and kill the workers)
                finished = True
                executor.shutdown(wait=True)
            yield result
        finished = True
    finally:
        if finished:
            executor.shutdown(wait=True)
        else:  # stopped (signal, error, consumer gone): do not wait for running files
            _kill_workers(executor)
            # never wait for it: a worker killed in the middle of sending a result leaves half a
            # message in the result pipe, and the executor's thread then waits for the rest forever
            executor.shutdown(wait=False, cancel_futures=True)
            ABANDONED_POOLS.append(executor)


# pools whose workers a stop killed: their threads may never end, so a process that has one
# leaves with `exit_now` (Python's exit would join those threads)
ABANDONED_POOLS: list[Any] = []


def exit_now(status: int, *streams: Any) -> None:
    """Leave with `status` after flushing `streams`: `os._exit` where a stopped pool is left
    (writes are atomic and already done; only buffered output needs flushing), else `sys.exit`."""
    if not ABANDONED_POOLS:
        sys.exit(status)
    for stream in (*streams, sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _kill_workers(executor: ProcessPoolExecutor) -> None:
    # the executor has no public way to stop running tasks; its process table is stable API
    # in practice (CPython 3.8 to 3.13)
    for process in list(getattr(executor, "_processes", {}).values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()

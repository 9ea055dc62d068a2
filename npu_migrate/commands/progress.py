"""Progress on standard error when it is a terminal, from the first second of a command: a
spinner while it prepares (finding the files, reading the project), then a bar with the count,
the rate and the time left, one step per file. Transient: nothing stays on the screen, and nothing
ever reaches a pipe or a log (standard error that is not a terminal gets no progress at all).

The bar is redrawn only between files, by the caller's thread (no refresh thread), so nothing
else is ever written while it is on the screen; output meant for the terminal goes through
`console`, which lifts the bar over it. The spinner has a thread of its own: nothing else is
printed while a command prepares."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

REFRESH_SECONDS = 0.1


def terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class TerminalProgress:
    """`enabled` is False for --quiet; standard error must be a terminal as well."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and terminal(sys.stderr)
        self._bar: Any = None
        self._status: Any = None
        self._task: Any = None
        self._last_refresh = 0.0

    @property
    def active(self) -> bool:
        return self._bar is not None

    @property
    def console(self) -> Any:
        return self._bar.console if self._bar is not None else None

    def prepare(self, text: str) -> None:
        """A spinner with `text` until the bar starts (or `stop`)."""
        if not self.enabled or self._bar is not None or self._status is not None:
            return
        from rich.console import Console

        self._status = Console(stderr=True).status(text, spinner="dots")
        self._status.start()

    @contextlib.contextmanager
    def preparing(self, text: str) -> Iterator[None]:
        """A spinner with `text` while the block runs."""
        self.prepare(text)
        try:
            yield
        finally:
            self._end_prepare()

    def _end_prepare(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def start(self, label: str, total: int) -> None:
        self._end_prepare()
        if not self.enabled or self._bar is not None:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class RateColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(f"{task.speed:.0f} files/s" if task.speed else "")

        self._bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), RateColumn(), TextColumn("ETA"),
                             TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                             auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
        self._bar.start()
        self._task = self._bar.add_task("files", total=total)

    def advance(self) -> None:
        if self._bar is None:
            return
        self._bar.advance(self._task)
        now = time.monotonic()
        if now - self._last_refresh > REFRESH_SECONDS:
            self._last_refresh = now
            self._bar.refresh()

    def stop(self) -> None:
        self._end_prepare()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

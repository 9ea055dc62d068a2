"""What every analysis of one device needs, computed once."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Self

import numpy as np

from npu_migrate.core.diagnostics import Diagnostic, Severity, Table
from npu_migrate.memory.model import Snapshot
from npu_migrate.memory.pool import PoolState, pool_at
from npu_migrate.memory.replay import Replay, replay
from npu_migrate.memory.sites import SiteTable
from npu_migrate.memory.steps import Steps, find_steps

MAX_FINDING_BLOCKS = 2000  # block ids one finding carries (JSON, HTML highlight)


@dataclass
class DeviceContext:
    snapshot: Snapshot
    rep: Replay
    steps: Steps
    sites: SiteTable
    findings: list[Diagnostic] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    marks: list[dict] = field(default_factory=list)  # findings anchored on events (for HTML)
    facts: dict = field(default_factory=dict)  # numbers later analyses (advice) build on
    details: dict = field(default_factory=dict)  # id(finding) -> its typed record

    @classmethod
    def build(cls, snapshot: Snapshot, device: int, sites: SiteTable,
              step_frame: str | None = None) -> DeviceContext:
        rep = replay(snapshot, device)
        return cls(snapshot, rep, find_steps(snapshot, rep, step_frame), sites)

    @property
    def device(self) -> int:
        return self.rep.device

    def add(self, code: str, message: str, severity: Severity = Severity.WARNING,
            event: int | None = None, **data) -> None:
        """Record a finding; `data` holds its typed facts (evidence, site, bytes, block rows)
        for the JSON report and the HTML page."""
        text = f"device {self.device}: {message}"
        finding = Diagnostic(code, text, self.snapshot.path, 0, 0, severity)
        self.findings.append(finding)
        record: dict[str, Any] = {"code": code, "severity": severity.value, "message": text,
                  "device": self.device, "event": None if event is None else int(event)}
        for key, value in data.items():
            record[key] = [int(v) for v in value] if key == "blocks" else value
        self.details[id(finding)] = record
        if event is not None and event >= 0:
            self.marks.append(record)

    def when(self, event: int) -> str:
        if event < 0:
            return "before the first recorded event"
        times = self.rep.trace.time_us
        if times is None:
            return f"event {event}"
        return f"event {event} (+{(times[event] - times[0]) / 1e6:.3f} s)"

    def seconds(self, event: int) -> float | None:
        """Seconds from the first event to `event`; None without times (torch_npu)."""
        times = self.rep.trace.time_us
        if times is None or event < 0 or not len(times):
            return None
        return round(float(times[event] - times[0]) / 1e6, 6)

    @cached_property
    def _pools(self) -> dict[int, PoolState]:
        return {}

    def pool(self, event: int) -> PoolState:
        if event not in self._pools:
            self._pools[event] = pool_at(self.snapshot, self.rep, event)
        return self._pools[event]

    @property
    def categories_given(self) -> bool:
        """Whether the producer labelled events with categories (profile-made snapshots)."""
        return self.rep.trace.category is not None

    def categories(self, rows: np.ndarray) -> list[str]:
        """Category per block row: the producer's label of its alloc event where there is
        one, else inferred from the call stack."""
        blocks = self.rep.blocks
        stacks = blocks.stack[rows].tolist()
        given = self.rep.trace.category
        if given is None:
            return [self.sites.category(s) for s in stacks]
        names = self.snapshot.category_names
        out = []
        for stack, alloc in zip(stacks, blocks.alloc[rows].tolist()):
            code = int(given[alloc]) if alloc >= 0 else -1
            out.append(names[code] if code >= 0 else self.sites.category(stack))
        return out

    def group_by_site(self, rows: np.ndarray, weights: np.ndarray, limit: int = 10
                      ) -> list[tuple[str, str, int, int, int]]:
        """(site, category, bytes, blocks, a representative stack) for `rows`, largest first."""
        stacks = self.rep.blocks.stack[rows]
        totals: dict[str, list] = {}
        for stack, weight, category in zip(stacks.tolist(), weights.tolist(),
                                           self.categories(rows)):
            site = self.sites.site(stack)
            entry = totals.setdefault(site, [category, 0, 0, stack])
            entry[1] += weight
            entry[2] += 1
        ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])[:limit]
        return [(site, cat, total, count, stack) for site, (cat, total, count, stack) in ranked]


class Bytes(int):
    """A byte count: an int everywhere (JSON writes the number), '3.03 GiB' when printed."""

    def __new__(cls, value: float) -> Self:
        return super().__new__(cls, int(value))

    def __str__(self) -> str:
        return fmt_bytes(int(self))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec) if not spec or spec[-1] not in "dxXnbo" \
            else int.__format__(int(self), spec)


def fmt_bytes(value: float) -> str:
    value = float(value)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.2f} {unit}"
        value /= 1024
    return f"{sign}{value:.2f} TiB"

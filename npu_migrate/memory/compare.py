"""`npu-migrate memory compare A B`: what changed between two runs, and whether B leaks.

Memory is compared per allocation identity, the stack plus the operator, not per file:line: a
tensor made by the same call chain matches across the runs even when an edit moved it to
another line (it shows as moved, not as +X at one line and -X at the other). Identities are
matched on their exact frames first, then on their frames without line numbers.

Three things are reported per device: the peak and what changed at it; what is left unfreed
at the end; and (MEM001, evidence "compared with the baseline") identities whose blocks B
leaves unfreed at the end while A, the baseline, gives that memory back: few large blocks
never freed, as in msMemScope's own leak-compare example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npu_migrate.core.diagnostics import Diagnostic, Report, Severity, Table
from npu_migrate.memory.context import MAX_FINDING_BLOCKS, Bytes, DeviceContext, fmt_bytes
from npu_migrate.memory.flame import block_column
from npu_migrate.memory.model import Snapshot
from npu_migrate.memory.report import SEVERITY_ORDER, build_contexts
from npu_migrate.memory.sites import Frame

LEAK_MIN_BYTES = 64 << 10  # an identity's unfreed growth worth a MEM001 ...
LEAK_PEAK_SHARE = 0.01  # ... and at least this share of the larger peak
BASELINE_SHARE = 0.5  # the baseline keeps at most half of what B keeps there

Identity = tuple[tuple[Frame, ...], str]  # frames (innermost first) and operator ("" none)


def loose(identity: Identity) -> tuple[tuple[tuple[str, str], ...], str]:
    """The identity without line numbers: what stays the same when code moves."""
    frames, operator = identity
    return tuple((name, filename) for name, filename, _ in frames), operator


@dataclass
class Group:
    """The blocks of one identity in one run."""

    site: str
    operator: str
    bytes: int = 0
    blocks: int = 0
    rows: list[int] = field(default_factory=list)


def identity_groups(ctx: DeviceContext, rows: np.ndarray) -> dict[Identity, Group]:
    blocks = ctx.rep.blocks
    operators = block_column(ctx, rows, ctx.rep.trace.operator)
    out: dict[Identity, Group] = {}
    for row, stack, op, size in zip(rows.tolist(), blocks.stack[rows].tolist(),
                                    operators.tolist(), blocks.counted[rows].tolist()):
        name = ctx.snapshot.operators[op] if op >= 0 else ""
        frames = ctx.snapshot.stacks[stack] if stack >= 0 else ()
        group = out.get((frames, name))
        if group is None:
            group = out[(frames, name)] = Group(ctx.sites.site(stack), name)
        group.bytes += int(size)
        group.blocks += 1
        group.rows.append(row)
    return out


@dataclass
class Change:
    """One identity in both runs (either side may be absent: None)."""

    a: Group | None
    b: Group | None

    @property
    def delta(self) -> int:
        return (self.b.bytes if self.b else 0) - (self.a.bytes if self.a else 0)

    def label(self) -> str:
        a, b = self.a, self.b
        either = b or a
        assert either is not None
        op = f" [{either.operator}]" if either.operator and not either.site.startswith(
            "operator ") else ""
        if a and b and a.site != b.site:
            return f"{a.site} -> {b.site}{op}"
        return f"{either.site}{op}"

    def note(self) -> str:
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        return "moved" if self.a.site != self.b.site else ""


def match(a: dict[Identity, Group], b: dict[Identity, Group]) -> list[Change]:
    """Pair identities: exact frames first, then frames without line numbers (summed), the
    rest stand alone."""
    changes = [Change(a[k], b[k]) for k in a.keys() & b.keys()]
    rest_a = {k: g for k, g in a.items() if k not in b}
    rest_b = {k: g for k, g in b.items() if k not in a}
    by_loose_a, by_loose_b = _merge_loose(rest_a), _merge_loose(rest_b)
    for key in by_loose_a.keys() | by_loose_b.keys():
        changes.append(Change(by_loose_a.get(key), by_loose_b.get(key)))
    return sorted(changes, key=lambda c: (-abs(c.delta), c.label()))


def _merge_loose(groups: dict[Identity, Group]) -> dict[tuple, Group]:
    out: dict[tuple, Group] = {}
    for key, group in sorted(groups.items(), key=lambda kv: -kv[1].bytes):
        merged = out.get(loose(key))
        if merged is None:
            out[loose(key)] = Group(group.site, group.operator, group.bytes, group.blocks,
                                    list(group.rows))
        else:
            merged.bytes += group.bytes
            merged.blocks += group.blocks
            merged.rows += group.rows
    return out


def live_at(ctx: DeviceContext, event: int) -> np.ndarray:
    return np.flatnonzero(ctx.rep.blocks.allocated_at(event))


def peak_categories(ctx: DeviceContext | None) -> dict[str, int]:
    if ctx is None or ctx.rep.n_events == 0:
        return {}
    rows = live_at(ctx, ctx.rep.peak_index)
    out: dict[str, int] = {}
    for category, size in zip(ctx.categories(rows), ctx.rep.blocks.counted[rows].tolist()):
        out[category] = out.get(category, 0) + size
    return out


def compare(before: Snapshot, after: Snapshot, limit: int = 20) -> tuple[Report, list[dict]]:
    """The comparison report and the typed records of its findings (for JSON)."""
    a = {c.device: c for c in build_contexts(before)}
    b = {c.device: c for c in build_contexts(after)}
    report = Report(f"Memory comparison: {before.path} -> {after.path}")
    report.summary.update({"A": before.path, "B": after.path})
    peaks, peak_rows, end_rows, category_rows = [], [], [], []
    pairs: list[tuple[Diagnostic, dict]] = []
    for device in sorted(set(a) | set(b)):
        ca, cb = a.get(device), b.get(device)
        pa, pb = (c.rep.peak_bytes if c else 0 for c in (ca, cb))
        ua, ub = (c.rep.final[0] if c else 0 for c in (ca, cb))
        peaks.append([device, Bytes(pa), Bytes(pb), Bytes(pb - pa),
                      round(100 * (pb - pa) / pa, 1) if pa else None, Bytes(ua), Bytes(ub),
                      ca.rep.n_events if ca else 0, cb.rep.n_events if cb else 0])
        at_peak = match(_groups(ca, "peak"), _groups(cb, "peak"))
        at_end = match(_groups(ca, "end"), _groups(cb, "end"))
        peak_rows += [[device, c.label(), Bytes(c.a.bytes if c.a else 0),
                       Bytes(c.b.bytes if c.b else 0), Bytes(c.delta), c.note()]
                      for c in at_peak[:limit] if c.delta]
        end_rows += [[device, c.label(), Bytes(c.a.bytes if c.a else 0),
                      Bytes(c.b.bytes if c.b else 0), Bytes(c.delta), c.note()]
                     for c in at_end[:limit] if c.delta]
        ka, kb = peak_categories(ca), peak_categories(cb)
        category_rows += [[device, k, Bytes(ka.get(k, 0)), Bytes(kb.get(k, 0)),
                           Bytes(kb.get(k, 0) - ka.get(k, 0))]
                          for k in sorted(set(ka) | set(kb),
                                          key=lambda k: (-abs(kb.get(k, 0) - ka.get(k, 0)), k))]
        report.summary[f"device {device} peak change"] = Bytes(pb - pa)
        report.summary[f"device {device} unfreed at end"] = f"{fmt_bytes(ua)} -> {fmt_bytes(ub)}"
        pairs += _findings(before, after, device, (pa, pb), (ua, ub), at_peak, at_end)
    pairs.sort(key=lambda pair: SEVERITY_ORDER[pair[0].severity])  # warnings first, as in report
    report.findings = [finding for finding, _ in pairs]
    records = [record for _, record in pairs]
    report.tables.append(Table("Peaks and what is left at the end", [
        "device", "peak A", "peak B", "change", "change %", "unfreed at end A",
        "unfreed at end B", "events A", "events B"], peaks))
    report.tables.append(Table("Live at the peak, by allocation identity (stack + operator; "
                               "largest changes first)",
                               ["device", "identity", "A", "B", "change", "note"], peak_rows))
    report.tables.append(Table("Left unfreed at the end, by allocation identity",
                               ["device", "identity", "A", "B", "change", "note"], end_rows))
    report.tables.append(Table("Live at the peak, by category", ["device", "category", "A", "B",
                                                                 "change"], category_rows))
    return report, records


def _groups(ctx: DeviceContext | None, moment: str) -> dict[Identity, Group]:
    if ctx is None:
        return {}
    rep = ctx.rep
    event = rep.peak_index if moment == "peak" else rep.n_events - 1
    return identity_groups(ctx, live_at(ctx, event))


def _findings(before: Snapshot, after: Snapshot, device: int, peaks: tuple[int, int],
              unfreed: tuple[int, int], at_peak: list[Change], at_end: list[Change]
              ) -> list[tuple[Diagnostic, dict]]:
    pa, pb = peaks
    ua, ub = unfreed
    out = []
    top = next((c for c in at_peak if c.delta), None)
    lead = (f"; the largest change at the peak: {top.label()} {_signed(top.delta)}"
            f"{' (' + top.note() + ')' if top.note() else ''}") if top else ""
    message = (f"device {device}: peak allocated {fmt_bytes(pa)} -> {fmt_bytes(pb)} "
               f"({_signed(pb - pa)}); left unfreed at the end {fmt_bytes(ua)} -> "
               f"{fmt_bytes(ub)}{lead}")
    out.append(_finding("MEM004", message, Severity.INFO, after.path, device,
                        bytes=max(pb, 0)))
    floor = max(LEAK_MIN_BYTES, int(LEAK_PEAK_SHARE * max(pa, pb)))
    leaks = [c for c in at_end if c.b and c.delta >= floor
             and (c.a.bytes if c.a else 0) <= BASELINE_SHARE * c.b.bytes]
    if ub <= ua:
        leaks = []  # B gives back at least as much as the baseline: no leak to explain
    for change in leaks[:5]:
        b_group = change.b
        assert b_group is not None
        kept_a = change.a.bytes if change.a else 0
        message = (f"device {device}: possible leak at {change.label()}: B leaves "
                   f"{b_group.blocks} blocks ({fmt_bytes(b_group.bytes)}) allocated there "
                   f"unfreed at the end where the baseline A leaves {fmt_bytes(kept_a)}; in all "
                   f"B leaves {fmt_bytes(ub)} unfreed against {fmt_bytes(ua)} (evidence: "
                   f"compared with the baseline {before.path})")
        out.append(_finding("MEM001", message, Severity.WARNING, after.path, device,
                            evidence=f"compared with the baseline {before.path}",
                            site=b_group.site, operator=b_group.operator or None,
                            bytes=b_group.bytes,
                            blocks=sorted(b_group.rows)[:MAX_FINDING_BLOCKS]))
    return out


def _finding(code: str, message: str, severity: Severity, path: str, device: int,
             **data: object) -> tuple[Diagnostic, dict]:
    finding = Diagnostic(code, message, path, 0, 0, severity)
    record = {"code": code, "severity": severity.value, "message": message, "device": device,
              "event": None, **{k: v for k, v in data.items() if v is not None}}
    return finding, record


def _signed(value: int) -> str:
    return ("+" if value >= 0 else "") + fmt_bytes(value)


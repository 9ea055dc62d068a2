"""Run every analysis on a snapshot and gather the findings and tables into one Report."""

from __future__ import annotations

from typing import Any

import numpy as np

from npu_migrate.core.diagnostics import Diagnostic, Report, Severity, Table
from npu_migrate.memory.advice import advise
from npu_migrate.memory.context import Bytes, DeviceContext
from npu_migrate.memory.fragmentation import analyze_fragmentation, analyze_oom
from npu_migrate.memory.history import analyze_history
from npu_migrate.memory.leaks import analyze_leaks
from npu_migrate.memory.model import ALLOC, FREE_REQ, Snapshot
from npu_migrate.memory.peak import analyze_peak
from npu_migrate.memory.sites import SiteTable
from npu_migrate.memory.consistency import analyze_consistency
from npu_migrate.memory.flame import group_views, groups, top_stacks
from npu_migrate.memory.waste import Thresholds, analyze_waste

SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


TOP_STACKS = 20  # allocation identities listed per device in JSON


def build_contexts(snapshot: Snapshot, devices: list[int] | None = None,
                   step_frame: str | None = None, thresholds: Thresholds | None = None
                   ) -> list[DeviceContext]:
    sites = SiteTable(snapshot.stacks)
    contexts = []
    for device in devices if devices is not None else snapshot.devices:
        ctx = DeviceContext.build(snapshot, device, sites, step_frame)
        for analysis in (analyze_history, analyze_consistency, analyze_peak, analyze_leaks,
                         analyze_fragmentation, analyze_oom):
            analysis(ctx)
        analyze_waste(ctx, thresholds)
        contexts.append(ctx)
    return contexts


def analyze(snapshot: Snapshot, devices: list[int] | None = None,
            step_frame: str | None = None, thresholds: Thresholds | None = None
            ) -> tuple[Report, list[DeviceContext]]:
    contexts = build_contexts(snapshot, devices, step_frame, thresholds)
    report = Report(f"Memory snapshot analysis: {snapshot.path}")
    report.summary = {
        "file": snapshot.path,
        "producer": snapshot.producer,
        "devices": [c.device for c in contexts],
        "events": sum(c.rep.n_events for c in contexts),
        "segments": len(snapshot.segments),
        "notes": list(snapshot.notes),
    }
    report.tables.append(overview(contexts))
    streams = stream_table(contexts)
    if streams.rows:
        report.tables.append(streams)
    for ctx in contexts:
        report.tables.extend(ctx.tables)
        report.findings.extend(ctx.findings)
    report.findings += [Diagnostic("MEM009", text, snapshot.path, 0, 0, Severity.WARNING)
                        for text in snapshot.inconsistencies]
    advice_findings, advice_table = advise(contexts, snapshot.path)
    report.findings.extend(advice_findings)
    if advice_table is not None:
        report.tables.append(advice_table)
    report.findings.sort(key=lambda d: SEVERITY_ORDER[d.severity])
    return report, contexts


def overview(contexts: list[DeviceContext]) -> Table:
    rows = []
    for ctx in contexts:
        rep = ctx.rep
        rows.append([ctx.device, rep.n_events, len(rep.blocks), len(ctx.steps),
                     Bytes(rep.peak_bytes), rep.peak_index, ctx.seconds(rep.peak_index),
                     rep.initial_known, Bytes(rep.reserved_after(rep.peak_reserved_index)),
                     Bytes(rep.final[0]), Bytes(rep.final[2])])
    return Table("Devices", ["device", "events", "blocks", "steps", "peak allocated",
                             "peak event", "peak time (s)", "peak exact", "peak reserved",
                             "allocated at end", "reserved at end"], rows)


def device_records(contexts: list[DeviceContext]) -> list[dict]:
    """Per device, the typed facts of the JSON report (see docs/schemas)."""
    out = []
    for ctx in contexts:
        rep = ctx.rep
        out.append({
            "device": ctx.device, "events": rep.n_events, "blocks": len(rep.blocks),
            "has_time": rep.trace.time_us is not None,
            "steps": {"count": len(ctx.steps), "evidence": ctx.steps.source,
                      "starts": ctx.steps.starts[:10000]},
            "peak": {"bytes": rep.peak_bytes, "event": rep.peak_index,
                     "time_s": ctx.seconds(rep.peak_index), "exact": rep.initial_known},
            "peak_reserved": {"bytes": rep.reserved_after(rep.peak_reserved_index),
                              "event": rep.peak_reserved_index},
            "initial": dict(zip(("allocated", "active", "reserved"), rep.initial)),
            "final": dict(zip(("allocated", "active", "reserved"), rep.final)),
            "leak_sites": ctx.facts.get("leak_sites", []),
            "at_peak": at_moment(ctx, rep.peak_index),
        })
    return out


def at_moment(ctx: DeviceContext, event: int) -> dict[str, Any]:
    """What is allocated after `event`: the top allocation identities (stack + operator) with
    their frames, and the totals by operator, thread and stream where the data has them."""
    rows = np.flatnonzero(ctx.rep.blocks.allocated_at(event))
    return {"event": event, "bytes": int(ctx.rep.blocks.counted[rows].sum()),
            "blocks": len(rows), "top_stacks": top_stacks(ctx, rows, TOP_STACKS),
            "by": {view: groups(ctx, rows, view)[:TOP_STACKS] for view in group_views(ctx)}}


def stream_peaks(ctx: DeviceContext) -> list[tuple[int, int, int]]:
    """(stream, peak allocated, allocated at the end) per stream of the device."""
    rep, trace = ctx.rep, ctx.rep.trace
    counted = rep.blocks.counted
    out = []
    streams = np.unique(np.concatenate([trace.stream[trace.action == ALLOC], rep.blocks.stream]))
    for stream in streams.tolist():
        on = trace.stream == stream
        delta = (np.where(on & (trace.action == ALLOC), trace.size, 0)
                 - np.where(on & (trace.action == FREE_REQ), trace.size, 0))
        start_rows = rep.blocks.allocated_at(-1) & (rep.blocks.stream == stream)
        series = int(counted[start_rows].sum()) + np.cumsum(delta)
        out.append((stream, int(series.max()) if len(series) else 0,
                    int(series[-1]) if len(series) else 0))
    return out


def stream_table(contexts: list[DeviceContext]) -> Table:
    rows = []
    for ctx in contexts:
        peaks = stream_peaks(ctx)
        if len(peaks) > 1:
            rows += [[ctx.device, hex(s), Bytes(p), Bytes(e)] for s, p, e in peaks]
    return Table("Streams", ["device", "stream", "peak allocated", "allocated at end"], rows)

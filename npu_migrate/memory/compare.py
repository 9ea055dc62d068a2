"""`npu-migrate memory compare A B`: two snapshots side by side (e.g. before/after AMP)."""

from __future__ import annotations

import numpy as np

from npu_migrate.core.diagnostics import Report, Table
from npu_migrate.memory.context import Bytes, DeviceContext
from npu_migrate.memory.model import Snapshot
from npu_migrate.memory.report import build_contexts


def peak_sites(ctx: DeviceContext) -> dict[str, int]:
    if ctx.rep.n_events == 0:
        return {}
    rows = np.flatnonzero(ctx.rep.blocks.allocated_at(ctx.rep.peak_index))
    groups = ctx.group_by_site(rows, ctx.rep.blocks.counted[rows], limit=1 << 30)
    return {site: size for site, _, size, _, _ in groups}


def peak_categories(ctx: DeviceContext) -> dict[str, int]:
    if ctx.rep.n_events == 0:
        return {}
    rows = np.flatnonzero(ctx.rep.blocks.allocated_at(ctx.rep.peak_index))
    out: dict[str, int] = {}
    for category, size in zip(ctx.categories(rows), ctx.rep.blocks.counted[rows].tolist()):
        out[category] = out.get(category, 0) + size
    return out


def compare(before: Snapshot, after: Snapshot, limit: int = 20) -> Report:
    a = {c.device: c for c in build_contexts(before)}
    b = {c.device: c for c in build_contexts(after)}
    report = Report(f"Memory comparison: {before.path} -> {after.path}")
    rows, site_rows, category_rows = [], [], []
    for device in sorted(set(a) | set(b)):
        ca, cb = a.get(device), b.get(device)
        pa = ca.rep.peak_bytes if ca else 0
        pb = cb.rep.peak_bytes if cb else 0
        ra = ca.rep.reserved_after(ca.rep.peak_reserved_index) if ca else 0
        rb = cb.rep.reserved_after(cb.rep.peak_reserved_index) if cb else 0
        rows.append([device, Bytes(pa), Bytes(pb), Bytes(pb - pa),
                     round(100 * (pb - pa) / pa, 1) if pa else None, Bytes(ra), Bytes(rb),
                     ca.rep.n_events if ca else 0, cb.rep.n_events if cb else 0])
        sa = peak_sites(ca) if ca else {}
        sb = peak_sites(cb) if cb else {}
        diffs = sorted(set(sa) | set(sb), key=lambda s: -abs(sb.get(s, 0) - sa.get(s, 0)))
        site_rows += [[device, s, Bytes(sa.get(s, 0)), Bytes(sb.get(s, 0)),
                       Bytes(sb.get(s, 0) - sa.get(s, 0))] for s in diffs[:limit]]
        ka = peak_categories(ca) if ca else {}
        kb = peak_categories(cb) if cb else {}
        category_rows += [[device, k, Bytes(ka.get(k, 0)), Bytes(kb.get(k, 0)),
                           Bytes(kb.get(k, 0) - ka.get(k, 0))]
                          for k in sorted(set(ka) | set(kb),
                                          key=lambda k: -abs(kb.get(k, 0) - ka.get(k, 0)))]
        report.summary[f"device {device} peak change"] = Bytes(pb - pa)
    report.tables.append(Table("Peaks", ["device", "peak A", "peak B", "change", "change %",
                                         "peak reserved A", "peak reserved B", "events A",
                                         "events B"], rows))
    report.tables.append(Table("Live at the peak, by site (largest changes first)",
                               ["device", "site", "A", "B", "change"], site_rows))
    report.tables.append(Table("Live at the peak, by category", ["device", "category", "A", "B",
                                                                 "change"], category_rows))
    return report

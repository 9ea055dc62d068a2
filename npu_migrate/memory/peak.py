"""MEM004: the allocated peak, and what is live then by call site and by category."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from npu_migrate.core.diagnostics import Severity, Table
from npu_migrate.memory.context import Bytes, DeviceContext, fmt_bytes


def analyze_peak(ctx: DeviceContext) -> None:
    rep = ctx.rep
    if rep.n_events == 0:
        return
    peak = rep.peak_index
    blocks = rep.blocks
    rows = np.flatnonzero(blocks.allocated_at(peak))
    weights = blocks.counted[rows]
    groups = ctx.group_by_site(rows, weights, limit=15)
    total = max(rep.peak_bytes, 1)
    ctx.tables.append(Table(
        f"Device {ctx.device}: live at the peak ({fmt_bytes(rep.peak_bytes)} at {ctx.when(peak)}),"
        " by allocation site", ["site", "category", "bytes", "blocks", "share"],
        [[site, cat, Bytes(size), count, round(100 * size / total, 1)]
         for site, cat, size, count, _ in groups]))
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for category, weight in zip(ctx.categories(rows), weights.tolist()):
        entry = by_category[category]
        entry[0] += weight
        entry[1] += 1
    ranked = sorted(by_category.items(), key=lambda kv: -kv[1][0])
    ctx.tables.append(Table(
        f"Device {ctx.device}: live at the peak by category (from the "
        f"{'producer' if ctx.categories_given else 'call stacks'})",
        ["category", "bytes", "blocks", "share"],
        [[cat, Bytes(size), count, round(100 * size / total, 1)]
         for cat, (size, count) in ranked]))
    ctx.facts.update(peak_event=peak, peak_bytes=rep.peak_bytes,
                     peak_sites=[(g[0], g[2]) for g in groups],
                     peak_categories={cat: v[0] for cat, v in ranked})
    top = groups[0] if groups else None
    lead = (f"; largest site {top[0]} holds {fmt_bytes(top[2])} "
            f"({100 * top[2] / total:.0f}%)") if top else ""
    bound = ("" if rep.initial_known else "; a lower bound: what was held before the first "
             "recorded event is unknown (no dump-time segment state)")
    ctx.add("MEM004", f"peak allocated {fmt_bytes(rep.peak_bytes)} at {ctx.when(peak)} with "
            f"{fmt_bytes(rep.reserved_after(peak))} reserved{lead}{bound}", Severity.INFO, peak,
            bytes=rep.peak_bytes, exact=rep.initial_known)

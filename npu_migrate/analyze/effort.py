"""The effort model's counts: how many items of each rating category (data/rating.json) the run
or one part of it holds, taken from the same classification as the CUDA-locations table, and
the effort-by-part table. A mixin of the Aggregator (it reads the aggregated scans)."""

from __future__ import annotations

import os
from collections import Counter

from npu_migrate.analyze import catalog
from npu_migrate.analyze.model import Site
from npu_migrate.analyze.rating import rate
from npu_migrate.core.diagnostics import Table


class EffortModel:
    # set by the Aggregator
    sites: list[tuple[str, Site]]
    third_party: list[tuple[str, str, str, int]]
    ops: dict[str, list[tuple[str, int, int]]]
    distributed: list[tuple[str, str, str, int]]
    roots: tuple[str, ...]
    paths: list[str]

    def _counts(self, fallback, part: str | None = None) -> dict[str, int]:
        """Counts per rating category, for the whole run or for one part (see `part_of`)."""
        def within(path: str) -> bool:
            return part is None or self.part_of(path) == part

        entries = catalog.third_party()
        counts: Counter[str] = Counter()
        third_party = [t for t in self.third_party if within(t[2])]
        # a line is costed once: third-party CUDA lines are costed by their library's category
        costed = {(path, line) for _, _, path, line in third_party}
        counts.update(site.status for path, site in self.sites if within(path) and (path, site.line) not in costed)
        counts["cpu_fallback"] = sum(1 for name, (state, _, _) in fallback.items() if state == "cpu-fallback risk"
                                     and any(within(path) for path, _, _ in self.ops[name]))
        kernels = [t for t in third_party if t[1].startswith("@")]
        seen: set[tuple[str, str]] = set()
        for key, detail, path, _ in third_party:
            weight = entries[key]["effort"]
            if weight == "triton_kernel" and (kernels and not detail.startswith("@")):
                continue
            if detail.startswith("@") or (weight, path) not in seen:
                counts[weight] += 1
                seen.add((weight, path))
        kinds = {kind for kind, _, path, _ in self.distributed if within(path)}
        counts["distributed"] = len(kinds - {"DeepSpeed", "Megatron-style model parallelism"})
        counts["large_scale"] = len(kinds & {"DeepSpeed", "Megatron-style model parallelism"})
        return {key: count for key, count in counts.items() if count}

    def part_of(self, path: str) -> str:
        """The part of the run a file belongs to: its PATH argument when several were given,
        else the top-level folder under the one PATH (files directly in it: '(top level)')."""
        absolute = os.path.abspath(path)
        if len(self.roots) > 1:
            for root in self.roots:
                if absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep):
                    return root
            return "(other)"
        root = self.roots[0] if self.roots else os.path.dirname(absolute)
        relative = os.path.relpath(absolute, root)
        head = relative.split(os.sep, 1)
        return head[0] if len(head) > 1 else "(top level)"

    def _effort_by_part(self, fallback) -> Table:
        table = Table("Effort by part (same model, per part of the code base)",
                      ["part", "files", "rating", "person-days", "drivers"])
        files: Counter[str] = Counter(self.part_of(path) for path in self.paths)
        for part in sorted(files):
            rating = rate(self._counts(fallback, part))
            drivers = ", ".join(f"{label} ×{count}" for label, count, _ in rating.reasons) or "—"
            table.rows.append([part, files[part], rating.level, rating.total_days, drivers])
        return table

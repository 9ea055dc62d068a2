"""One classification of CUDA code locations, taken from the engine's own results for the file,
so that `analyze` can never say something about a line that `apply` contradicts.

Every location ends in exactly one status, decided per source line (all locations on a line
share it; a line inside a multi-line statement shares the statement's records):

- `rewritten`: an edit of `apply` covers the line (its rule codes are named). A diagnostic the
  same rule adds there is a note on the rewrite, not work for a person.
- `reported`: no edit, but a rule reports the line with its advice (a person acts, guided).
- `policy`: a rule would handle the line, but the current selection leaves it (not selected,
  `per-file-ignores`, or a rule that is off by default).
- `manual`: no rule handles the line at all: it needs a person.

The rating and the effort estimate count these statuses, never anything else.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from npu_migrate.analyze import catalog
from npu_migrate.analyze.model import Site
from npu_migrate.apply.engine import FileOutcome

STATUSES = ("rewritten", "reported", "policy", "manual")
STATUS_LABELS = {"rewritten": "rewritten by apply", "reported": "reported by a rule",
                 "policy": "left by policy", "manual": "needs a person"}
STATUS_CODES = {"rewritten": "ANA001", "manual": "ANA002", "reported": "ANA003", "policy": "ANA004"}
IGNORED_EDITS = frozenset({"NPU100"})  # the `import torch_npu` insertion is not a CUDA location
# apply's final sweep: it flags what no rule handles, so a line only it reports needs a person
SWEEP_CODES = frozenset({"NPU599"})


@dataclass
class EngineRecord:
    code: str
    action: str  # "fix" or "flag"
    message: str
    line: int
    col: int


def kind_of_code(code: str) -> str:
    """The kind of CUDA location a rule code is about (for engine records with no site of ours)."""
    for prefix, kind in catalog.load("cuda_kinds")["code_ranges"]:
        if code.startswith(prefix):
            return kind
    return "other CUDA API"


def engine_records(outcome: FileOutcome) -> list[EngineRecord]:
    records = [EngineRecord(e.code, "fix", e.message, e.line, e.col)
               for e in outcome.edits if e.code not in IGNORED_EDITS]
    records += [EngineRecord(d.code, "flag", d.message, d.line, d.col) for d in outcome.diagnostics]
    return records


def statement_spans(tree: ast.Module | None, wanted: Iterable[int] = ()) -> dict[int, tuple[int, int]]:
    """line -> (first, last) line of the innermost simple statement spanning it, for multi-line
    statements around the `wanted` lines. Only statements are visited (never expressions), and
    only compound statements that contain a wanted line are entered."""
    spans: dict[int, tuple[int, int]] = {}
    lines = sorted(set(wanted))
    if tree is None or not lines:
        return spans

    def holds_wanted(first: int, last: int) -> bool:
        index = bisect.bisect_left(lines, first)
        return index < len(lines) and lines[index] <= last

    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        if not holds_wanted(first, last):
            continue
        if hasattr(node, "body"):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.match_case):  # has no position of its own
                    stack += child.body
                elif isinstance(child, (ast.stmt, ast.excepthandler)):
                    stack.append(child)
        elif last > first:
            for line in range(first, last + 1):
                spans.setdefault(line, (first, last))
    return spans


class LineRecords:
    """Engine records looked up by the line (or multi-line statement) of a location."""

    def __init__(self, records: Iterable[EngineRecord], spans: dict[int, tuple[int, int]]) -> None:
        self.spans = spans
        self.by_line: dict[int, list[EngineRecord]] = {}
        for record in records:
            self.by_line.setdefault(record.line, []).append(record)

    def key(self, line: int) -> int:
        return self.spans.get(line, (line, line))[0]

    def at(self, line: int) -> list[EngineRecord]:
        first, last = self.spans.get(line, (line, line))
        found = list(self.by_line.get(line, []))
        for other in range(first, last + 1):
            if other != line:
                found += self.by_line.get(other, [])
        return found


def classify(sites: list[Site], outcome: FileOutcome | None, tree: ast.Module | None = None,
             unselected: FileOutcome | None = None) -> list[Site]:
    """Give every site its status from `outcome` (the engine run with the selected rules) and,
    for lines it leaves alone, from `unselected` (the run with every rule). Engine records on a
    line with no site of the scanner become sites of their own, so every edit and every report
    of `apply` is a row. Returns the sites sorted by position, one per (line, col)."""
    records = engine_records(outcome) if outcome else []
    others = engine_records(unselected) if unselected else []
    spans = statement_spans(tree, [s.line for s in sites] + [r.line for r in records + others])
    selected = LineRecords(records, spans)
    everything = LineRecords(others, spans)
    unique: dict[tuple[int, int], Site] = {}
    for site in sites:
        unique.setdefault((site.line, site.col), site)
    covered = {selected.key(s.line) for s in unique.values()}
    for line, records in sorted(selected.by_line.items()):
        if selected.key(line) not in covered:
            first = min(records, key=lambda r: r.col)
            unique[(line, first.col)] = Site(kind_of_code(first.code), line, first.col, "")
            covered.add(selected.key(line))
    for site in unique.values():
        records = selected.at(site.line)
        site.actions = [(r.code, r.action, r.message) for r in records]
        handled_elsewhere = [r for r in everything.at(site.line) if r.code not in SWEEP_CODES]
        if any(r.action == "fix" for r in records):
            site.status = "rewritten"
        elif any(r.code not in SWEEP_CODES for r in records):
            site.status = "reported"
        elif handled_elsewhere:
            site.status = "policy"
            site.actions = [(r.code, "policy", r.message) for r in handled_elsewhere]
        else:
            site.status = "manual"
    return sorted(unique.values(), key=lambda s: (s.line, s.col))


def action_text(site: Site) -> str:
    """What `apply` does about the site, in the words of its status."""
    fixes = "; ".join(dict.fromkeys(f"{c} {m}" for c, a, m in site.actions if a == "fix"))
    notes = "; ".join(dict.fromkeys(f"{c} {m}" for c, a, m in site.actions if a != "fix"))
    if site.status == "rewritten":
        return f"rewritten by apply: {fixes}" + (f" (apply also notes: {notes})" if notes else "")
    if site.status == "reported":
        return f"reported by a rule, a person applies its advice: {notes}"
    if site.status == "policy":
        return f"left by policy (the rule is not selected for this file): {notes}"
    swept = sorted({c for c, _, _ in site.actions if c in SWEEP_CODES})
    if swept:
        return f"needs a person: no rule handles this line (apply's final sweep flags it: {', '.join(swept)})"
    return "needs a person: no rule rewrites or reports this line"

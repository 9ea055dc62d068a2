"""Analysing one file (in a worker process): read and decode it, parse it once with `ast`, scan
it, and, when the architecture analysis is wanted, ask the codemod engine what `apply` would do
at each CUDA location. The engine prefilters itself, so files without CUDA code cost it nothing."""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterator, Sequence

from npu_migrate.analyze import catalog
from npu_migrate.analyze.model import FileScan, Site
from npu_migrate.analyze.scan import Scanner
from npu_migrate.core.discovery import CUDA_SUFFIXES, SHELL_SUFFIXES
from npu_migrate.apply.engine import FileOutcome, migrate_text
from npu_migrate.core.parallel import ignore_interrupts, ordered_map
from npu_migrate.apply.runner import RunPlan
from npu_migrate.core.sources import SourceError, read_source
from codemods.framework.facts import FileFacts

LAUNCHERS = re.compile(r"\btorchrun\b|-m\s+torch\.distributed\.(?:launch|run)\b|^\s*deepspeed\s|\baccelerate\s+launch\b")


def analyze_file(path: str, plan: RunPlan | None) -> FileScan:
    """`plan` is None when CUDA locations are not wanted (no engine run)."""
    if path.endswith(CUDA_SUFFIXES):
        scan = FileScan(path)
        scan.third_party.append((catalog.third_party_file_entry()["cuda"], os.path.basename(path), 0))
        return scan
    try:
        text = read_source(path).text
    except SourceError as exc:
        return FileScan(path, error=str(exc))
    if path.endswith(SHELL_SUFFIXES):
        scan = FileScan(path)
        for number, line in enumerate(text.splitlines(), 1):
            launcher = LAUNCHERS.search(line)
            if launcher and not line.lstrip().startswith("#"):
                scan.distributed.append(("launcher", launcher.group(0).strip(), number))
        if plan is not None:
            _merge(scan, migrate_text(text, path, plan.ruleset_for(path)))
        return scan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours to print
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            return FileScan(path, error=f"{path}:{exc.lineno or 0}:{exc.offset or 0}: syntax error: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            return FileScan(path, error=f"{path}:0:0: cannot parse: {exc}")
    facts = FileFacts.from_tree(tree)
    try:
        scan = Scanner(path, text, tree, facts).run()
    except RecursionError:
        return FileScan(path, error=f"{path}:0:0: too deeply nested to analyse")
    if plan is not None:
        ruleset = plan.ruleset_for(path)
        _merge(scan, migrate_text(text, path, ruleset, tree=tree))  # the file is parsed once
    return scan


def _kind_of_code(code: str) -> str:
    for prefix, kind in catalog.load("cuda_kinds")["code_ranges"]:
        if code.startswith(prefix):
            return kind
    return "other CUDA API"


def _merge(scan: FileScan, outcome: FileOutcome) -> None:
    """Attach the engine's edits and diagnostics to the CUDA sites on their line (nearest column);
    an engine record on a line with no site of ours becomes a site of its own."""
    scan.engine_error = outcome.error
    records = [(e.code, "fix", e.message, e.line, e.col) for e in outcome.edits if e.code != "NPU100"]
    records += [(d.code, "flag", d.message, d.line, d.col) for d in outcome.diagnostics]
    by_line: dict[int, list[Site]] = {}
    for site in scan.sites:
        by_line.setdefault(site.line, []).append(site)
    for code, action, message, line, col in records:
        candidates = by_line.get(line)
        if not candidates:
            site = Site(_kind_of_code(code), line, col, "")
            scan.sites.append(site)
            by_line[line] = candidates = [site]
        site = min(candidates, key=lambda s: (abs(s.col - col), s.col))
        site.actions.append((code, action, message))
    scan.sites.sort(key=lambda s: (s.line, s.col))


# -- parallel run ----------------------------------------------------------------------------
_PLAN: RunPlan | None = None


def _init(plan: RunPlan | None) -> None:
    global _PLAN
    ignore_interrupts()
    _PLAN = plan


def _work(path: str) -> FileScan:
    return analyze_file(path, _PLAN)


def run(paths: Sequence[str], plan: RunPlan | None, jobs: int | None = None) -> Iterator[FileScan]:
    """One FileScan per path, in order, computed on `jobs` processes and streamed."""
    return ordered_map(_work, lambda path: analyze_file(path, plan), paths,
                       jobs or os.cpu_count() or 1, _init, (plan,))

"""Analysing one file (in a worker process): read and decode it, parse it once with `ast`, scan
it, and, when the architecture analysis is wanted, ask the codemod engine what `apply` would do
at each CUDA location. The engine prefilters itself, so files without CUDA code cost it nothing."""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence

from codemods.model.facts import FileFacts
from npu_migrate.analyze import catalog
from npu_migrate.analyze.classify import classify
from npu_migrate.analyze.model import FileScan
from npu_migrate.analyze.scan import Scanner
from npu_migrate.analyze.tuning import tuning_findings
from npu_migrate.apply.engine import FileOutcome, RuleSet, migrate_text
from npu_migrate.apply.runner import RunPlan
from npu_migrate.core.discovery import CUDA_SUFFIXES, JSON_SUFFIXES, MANIFEST_SUFFIXES, SHELL_SUFFIXES
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX
from npu_migrate.core.parallel import ignore_interrupts, ordered_map
from npu_migrate.core.sources import SourceError, read_source

# what `apply` reads beyond the files analyze analyses: notebooks, requirement / environment files,
# DeepSpeed configurations (chosen in `npu_migrate.analyze.analyze`)
APPLY_ONLY_SUFFIXES = (NOTEBOOK_SUFFIX, *MANIFEST_SUFFIXES, *JSON_SUFFIXES)
LAUNCHERS = re.compile(r"\btorchrun\b|-m\s+torch\.distributed\.(?:launch|run)\b|^\s*deepspeed\s|\baccelerate\s+launch\b")


def analyze_file(path: str, plan: RunPlan | None) -> FileScan:
    """`plan` is None when CUDA locations are not wanted (no engine run)."""
    if path.endswith(CUDA_SUFFIXES):
        scan = FileScan(path)
        scan.third_party.append((catalog.third_party_file_entry()["cuda"], os.path.basename(path), 0))
        if plan is not None:
            try:
                _apply_counts(scan, migrate_text(read_source(path).text, path, plan.ruleset_for(path)))
            except SourceError:
                scan.apply_failed = True
        return scan
    try:
        text = read_source(path).text
    except SourceError as exc:
        return FileScan(path, error=str(exc), apply_failed=True, apply_only=path.endswith(APPLY_ONLY_SUFFIXES))
    if path.endswith(APPLY_ONLY_SUFFIXES):  # read for apply's counts only
        scan = FileScan(path, apply_only=True)
        if plan is not None:
            _apply_counts(scan, migrate_text(text, path, plan.ruleset_for(path)))
        return scan
    if path.endswith(SHELL_SUFFIXES):
        scan = FileScan(path)
        for number, line in enumerate(text.splitlines(), 1):
            launcher = LAUNCHERS.search(line)
            if launcher and not line.lstrip().startswith("#"):
                scan.distributed.append(("launcher", launcher.group(0).strip(), number))
        if plan is not None:
            _classify(scan, text, plan)
        scan.findings += tuning_findings(path, text)
        return scan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours to print
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            failed = FileScan(path, error=f"{path}:{exc.lineno or 0}:{exc.offset or 0}: syntax error: {exc.msg}")
            if plan is not None:  # apply may still migrate it (newer syntax than this Python's)
                _apply_counts(failed, migrate_text(text, path, plan.ruleset_for(path)))
            return failed
        except (ValueError, RecursionError, MemoryError) as exc:
            return FileScan(path, error=f"{path}:0:0: cannot parse: {exc}", apply_failed=True)
    facts = FileFacts.from_tree(tree)
    try:
        scan = Scanner(path, text, tree, facts).run()
    except RecursionError:
        return FileScan(path, error=f"{path}:0:0: too deeply nested to analyse")
    except Exception as exc:
        return FileScan(path, error=f"{path}:0:0: internal error ({type(exc).__name__}: {exc}); "
                                    "file not analysed (please report this as a bug)")
    if plan is not None:
        _classify(scan, text, plan, tree)  # the file is parsed once
    scan.findings += tuning_findings(path, text, tree)
    return scan


def _classify(scan: FileScan, text: str, plan: RunPlan, tree: ast.Module | None = None) -> None:
    """Run the engine as `apply` would and classify the scan's CUDA sites from its results. Lines
    it leaves alone are looked up once more with the rules the selection leaves out for this file,
    to tell 'left by policy' (a rule exists but is not selected here) from 'needs a person'."""
    ruleset = plan.ruleset_for(scan.path)
    outcome = migrate_text(text, scan.path, ruleset, tree=tree)
    _apply_counts(scan, outcome)
    scan.engine_error = outcome.error
    scan.sites = classify(scan.sites, outcome, tree)
    left_out = _left_out(ruleset, plan) if any(s.status == "manual" for s in scan.sites) else None
    if left_out is not None:  # only files with lines no selected rule touches pay for this
        scan.sites = classify(scan.sites, outcome, tree, migrate_text(text, scan.path, left_out, tree=tree))


def _apply_counts(scan: FileScan, outcome: FileOutcome) -> None:
    scan.apply_changed = outcome.changed
    scan.apply_failed = outcome.error is not None
    scan.apply_severities = dict(Counter(d.severity.value for d in outcome.diagnostics))
    scan.engine_error = outcome.error


_LEFT_OUT: dict[frozenset[str], RuleSet | None] = {}


def _left_out(ruleset: RuleSet, plan: RunPlan) -> RuleSet | None:
    """The rules this file's selection leaves out, with the plan's options (None: none)."""
    from codemods.api.registry import all_rules

    selected = frozenset(ruleset.codes())
    if selected not in _LEFT_OUT:
        rules = [r for r in all_rules() if r.code not in selected]
        _LEFT_OUT[selected] = RuleSet(rules, plan.options) if rules else None
    return _LEFT_OUT[selected]


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

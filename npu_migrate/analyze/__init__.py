"""`npu-migrate analyze`: what a CUDA code base is in for on Ascend NPUs. Architecture (model
structure, CUDA locations with what `apply` does, distributed set-up, custom CUDA code, a
complexity rating), computation (heavy operators, NPU kernel support, fusion, AMP,
collectives) and memory (DataLoaders, transfers, synchronisation, leaks, allocator advice)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from npu_migrate.analyze.aggregate import SECTIONS, Aggregator, Assessment
from npu_migrate.apply.runner import RunPlan
from npu_migrate.core.discovery import CUDA_SUFFIXES, PYTHON_SUFFIXES, SHELL_SUFFIXES

ANALYZED_SUFFIXES = PYTHON_SUFFIXES + SHELL_SUFFIXES + CUDA_SUFFIXES

__all__ = ["SECTIONS", "Assessment", "analyze", "default_plan"]


def default_plan(select: Sequence[str] = (), ignore: Sequence[str] = (), enable: Sequence[str] = (),
                 options: dict | None = None, per_file_ignores: dict | None = None, root: str = ".") -> RunPlan:
    from codemods.api.registry import all_rules
    from codemods.api.selectors import select_rules, switched_off_option

    chosen = select_rules(all_rules(), select, ignore, enable)
    facts = tuple({fact.key: fact for rule in chosen for fact in rule.project_facts}.values())
    return RunPlan([r.code for r in chosen], dict(options or {}) | switched_off_option(all_rules(), ignore),
                   dict(per_file_ignores or {}), root, project_facts=facts)


def attach_project_facts(plan: RunPlan, files: Sequence[str]) -> None:
    """The project facts the plan's rules declare, per package root as `apply` finds them, built
    here over the analysed files (no store), so that what analyze says `apply` does is what
    `apply` does."""
    if not plan.project_facts or not files:
        return
    from codemods.api.facts import local_project
    from npu_migrate.apply.facts import PackageRoots, unconfigured_bound
    from npu_migrate.core.config import Settings

    roots, settings = PackageRoots(unconfigured_bound(files)), Settings()
    members: dict[str, list[str]] = {}
    for file in files:
        root = roots.of(file, settings)
        plan.file_roots[os.path.abspath(file)] = root
        members.setdefault(root, []).append(file)
    for root, paths in members.items():
        project = local_project(plan.project_facts, paths, root)
        plan.facts[root] = {fact.key: fact.merge(project) for fact in plan.project_facts}
    plan.clear_rulesets()


def _chosen_by_facts(plan: RunPlan, path: str) -> bool:
    """A file a project fact brings into apply's run (a JSON file the code passes to DeepSpeed)."""
    return any(fact.chooses(indexes[fact.key], path) for indexes in plan.facts.values()
               for fact in plan.project_facts if path.endswith(fact.chooses_among) and fact.key in indexes)


def apply_only_files(paths: Sequence[str], exclude: Sequence[str], respect_gitignore: bool,
                     analysed: Sequence[str], plan: RunPlan) -> list[str]:
    """The files `apply` reads that analyze does not analyse, as apply chooses them: notebooks,
    requirement and conda environment files by their name, DeepSpeed configurations by their
    name or because the code passes them to DeepSpeed (`attach_project_facts` first); only kinds
    a selected rule reads."""
    from npu_migrate.core.discovery import (
        JSON_SUFFIXES,
        MANIFEST_SUFFIXES,
        deepspeed_config_name,
        discover,
        manifest_name,
    )
    from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX

    read = plan.ruleset_for("").suffixes()
    found = [f for f in discover(paths, exclude, (NOTEBOOK_SUFFIX, *MANIFEST_SUFFIXES, *JSON_SUFFIXES),
                                 respect_gitignore) if f.endswith(read)]
    return [f for f in found if f.endswith(NOTEBOOK_SUFFIX) or (f.endswith(MANIFEST_SUFFIXES) and manifest_name(f))
            or (f.endswith(JSON_SUFFIXES) and (deepspeed_config_name(f) or _chosen_by_facts(plan, f)))]


def analyze(paths: Sequence[str], only: Sequence[str] = SECTIONS, jobs: int | None = None,
            exclude: Sequence[str] = (), plan: RunPlan | None = None, respect_gitignore: bool = True,
            progress: Callable[[int, int], None] | None = None,
            torch_npu_version: str | None = None) -> Assessment:
    """Analyse files and folders. Raises FileNotFoundError for a path that does not exist and
    ValueError for a malformed `torch_npu_version` ('2.6', '2.6.0'). `progress(done, total)` is
    called once the files are known (done 0) and after each file."""
    from npu_migrate.analyze.catalog import parse_version

    if torch_npu_version:
        parse_version(torch_npu_version)
    from npu_migrate.analyze.worker import run
    from npu_migrate.core.discovery import discover

    only = tuple(s for s in SECTIONS if s in only)
    files = discover(paths, exclude, ANALYZED_SUFFIXES, respect_gitignore)
    engine_plan = (plan or default_plan()) if "architecture" in only else None
    if engine_plan is not None:
        # what apply reads beyond them (for its counts) and the project facts its rules read
        attach_project_facts(engine_plan, [f for f in files if f.endswith(PYTHON_SUFFIXES + SHELL_SUFFIXES)])
        files += apply_only_files(paths, exclude, respect_gitignore, files, engine_plan)
    aggregator = Aggregator(only, torch_npu_version, tuple(paths))
    if progress is not None:
        progress(0, len(files))
    for done, scan in enumerate(run(files, engine_plan, jobs), 1):
        aggregator.add(scan)
        if progress is not None:
            progress(done, len(files))
    return aggregator.finish()

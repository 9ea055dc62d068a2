"""One `npu-migrate apply` run over files, as a pipeline:

    settings → plan → read → cache → migrate → store

- settings: each file's configuration (`core.config.SettingsFinder`);
- plan: the rules each configuration selects, from the rule catalogue (`plan.Planner`); the
  files they read (`files.gather`), narrowed by `--changed-since` and `--shard` (a package root
  stays in one shard unless it is larger than a shard's share);
- read: every file through the run's one bounded, non-blocking reader (`files.read_bounded`);
  the project facts the selected rules declare, summarized per file in the workers and merged
  per package root of the run's own files (`facts.RunFacts`);
- cache: a file's result is looked up under its content, the run's key and what the project
  facts say about it (`cache.Cache`, `RunPlan.facts_key`);
- migrate: the misses on all cores (`runner.run`);
- store: each changed file written back atomically, or into the `--output-dir` copy.

The command (`npu_migrate/commands/apply.py`) parses options, calls `prepare`, prints what
`ApplyRun.results()` yields and exits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

from codemods.api.facts import ProjectFact
from npu_migrate.apply.cache import Cache, FactStore, facts_salt, run_key
from npu_migrate.apply.facts import PackageRoots, RunFacts, inside, unconfigured_bound
from npu_migrate.apply.files import default_max_file_bytes, gather
from npu_migrate.apply.plan import Planner, cache_dir_for
from npu_migrate.apply.runner import FileResult, RunPlan, clean_stale_temps, run, write_back
from npu_migrate.apply.selection import changed_since, parse_shard, relative_key, shard_by_group
from npu_migrate.core.config import Settings, SettingsFinder
from npu_migrate.core.discovery import copy_for_output


@dataclass
class ApplyRequest:
    """What the command line asks of a run over files."""

    paths: Sequence[str]
    mode: str = "write"  # write, check, diff, dry-run, add-noqa
    select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    enable: Sequence[str] = ()
    overrides: dict[str, str] = field(default_factory=dict)  # configuration keys given as options
    exclude: Sequence[str] = ()
    output_dir: str | None = None
    changed_since: str | None = None
    shard: str | None = None
    jobs: int | None = None
    no_cache: bool = False
    cache_dir: str | None = None


@dataclass
class ApplyRun:
    """A prepared run: its files, each with its settings, and the plan of each configuration."""

    request: ApplyRequest
    finder: SettingsFinder
    planner: Planner
    files: list[tuple[str, Settings]]
    facts: RunFacts | None = None
    targets: dict[str, str] | None = None  # source -> copy, under --output-dir

    def start(self) -> None:
        """Before the first write: copy the tree under `--output-dir`, and remove what runs killed
        mid-write left in the folders to write."""
        if self.request.output_dir:
            self.targets = copy_for_output(self.request.paths, self.request.output_dir)
        if self.request.mode == "write":
            clean_stale_temps(list(self.targets.values()) if self.targets else [file for file, _ in self.files])

    def results(self) -> Generator[FileResult, None, None]:
        """Each file's result, in order, after it was stored (written back in `write` mode).
        Closing the generator stops the current group's workers."""
        for plan, members in self._groups():
            settings = self.planner.settings_of(plan)
            directory = cache_dir_for(settings, self.request.cache_dir, self.request.no_cache)
            cache = None
            if directory is not None:
                cache = Cache(directory, run_key(plan.codes, plan.options,
                                                 json.dumps(plan.per_file_ignores, sort_keys=True)))
            for result in run(members, plan, self.request.jobs or settings.jobs, cache):
                if result.new_bytes is not None and self.request.mode == "write" and not result.outcome.error:
                    write_back(result, self.targets[result.path] if self.targets else None)
                yield result

    def _groups(self) -> list[tuple[RunPlan, list[str]]]:
        """Files sharing settings run together, groups in the order of their first file."""
        grouped: dict[int, tuple[RunPlan, list[str]]] = {}
        for file, settings in self.files:
            grouped.setdefault(id(settings), (self.planner(settings), []))[1].append(file)
        return list(grouped.values())


def prepare(request: ApplyRequest, finder: SettingsFinder) -> ApplyRun:
    """Plan a run over the (existing) paths of `request`: choose and narrow its files, build the
    project facts their rules need; nothing is written yet (`ApplyRun.start`). Raises ConfigError,
    RuleError (a ValueError) and SelectionError with one line for the user."""
    planner = Planner(request.select, request.ignore, request.enable, request.overrides,
                      request.cache_dir, request.no_cache)

    def choosers(settings: Settings) -> tuple[str, ...]:
        return tuple(s for fact in planner(settings).project_facts for s in fact.chooses_among)

    gathered = gather(request.paths, finder, request.exclude, lambda s: planner(s).suffixes(), choosers)
    roots = PackageRoots(unconfigured_bound([f for f, s in gathered.files if not _configured(f, s)]))
    root_of = {file: roots.of(file, settings) for file, settings in gathered.discovered}
    files = _narrow(gathered.files, request, root_of)
    run_ = ApplyRun(request, finder, planner, files)
    wanted: dict[str, dict[str, ProjectFact]] = {}  # root -> the facts its files' rules declare
    for file, settings in files:
        plan = planner(settings)
        if plan.project_facts:
            root = root_of[file]
            plan.file_roots[os.path.abspath(file)] = root
            wanted.setdefault(root, {}).update((fact.key, fact) for fact in plan.project_facts)
    if wanted:
        run_.facts = RunFacts(roots, finder, request.exclude, root_of, _fact_store(request, files),
                              request.jobs or files[0][1].jobs, default_max_file_bytes())
        built = run_.facts.build({root: tuple(facts.values()) for root, facts in wanted.items()})
        for file, settings in files:
            plan = planner(settings)
            own = plan.file_roots.get(os.path.abspath(file))
            if own in built:
                plan.facts[own] = built[own]
        run_.files = [(f, s) for f, s in files if f not in gathered.undecided or _chosen(f, planner(s))]
    else:
        run_.files = [(f, s) for f, s in files if f not in gathered.undecided]
    for plan, _ in run_._groups():
        plan.clear_rulesets()  # rule sets built before the facts carry none
    return run_


def _configured(path: str, settings: Settings) -> bool:
    return bool(settings.source) and inside(os.path.abspath(path), os.path.abspath(settings.root))


def _narrow(files: list[tuple[str, Settings]], request: ApplyRequest,
            root_of: dict[str, str]) -> list[tuple[str, Settings]]:
    """What `--changed-since` and `--shard` keep. A shard keeps package roots together (their
    project facts are then built once, by one shard) unless a root is larger than a shard's
    share; every path is keyed relative to its configuration's folder, or to the working folder."""
    if request.changed_since:
        changed = changed_since(request.changed_since, request.paths)
        files = [(f, s) for f, s in files if os.path.abspath(f) in changed]
    if request.shard:
        k, n = parse_shard(request.shard)
        here = os.path.abspath(".")
        bases: dict[int, str] = {}
        root_keys: dict[tuple[str, str], str] = {}
        keys = []
        for file, settings in files:
            if id(settings) not in bases:
                bases[id(settings)] = os.path.abspath(settings.root if settings.source else ".")
            base = bases[id(settings)]
            root = (root_of[file], base)
            if root not in root_keys:
                root_keys[root] = relative_key(*root)
            named_from_here = base == here and not os.path.isabs(file) and not file.startswith(os.pardir)
            keys.append((root_keys[root], file.replace(os.sep, "/") if named_from_here
                         else relative_key(os.path.abspath(file), base)))
        files = [entry for entry, kept in zip(files, shard_by_group(keys, k, n)) if kept]
    return files


def _chosen(path: str, plan: RunPlan) -> bool:
    """Whether a project fact of the plan chooses this file (a JSON file the code passes to DeepSpeed)."""
    root = plan.file_roots.get(os.path.abspath(path))
    indexes = plan.facts.get(root or "", {})
    return any(fact.chooses(indexes[fact.key], path) for fact in plan.project_facts
               if path.endswith(fact.chooses_among) and fact.key in indexes)


def _fact_store(request: ApplyRequest, files: list[tuple[str, Settings]]) -> FactStore | None:
    """The project facts live in the cache folder of the run's first file (`--cache-dir` for all)."""
    if request.no_cache or not files:
        return None
    directory = cache_dir_for(files[0][1], request.cache_dir, request.no_cache)
    return FactStore(directory, facts_salt()) if directory else None

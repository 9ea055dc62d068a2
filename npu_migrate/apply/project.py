"""Facts about the whole project that single-file rules need, computed once per run.

Today: the loader index (`codemods.framework.loadervalues.project_loader_index`: helpers
that return a pinning DataLoader, for NPU410) and the device-value index (`codemods.framework.devicevalues.project_device_index`), which
says how other modules use a module's CUDA device constants. It is computed over *every*
discovered file, before `--changed-since` and `--shard` narrow the set to migrate, so a file's
result does not depend on which subset of the project a run looks at. It travels to the
workers in the run plan's rule options, so it is also part of the cache key: a change to how
any module uses an imported device constant invalidates the cached results (correct, if
coarse; such changes are rare).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from codemods.framework.devicevalues import INDEX_OPTION, project_device_index
from codemods.framework.loadervalues import LOADER_INDEX_OPTION, project_loader_index
from npu_migrate.apply.runner import RunPlan

NEEDS_INDEX = frozenset({"NPU500"})  # the rules that read the device index
NEEDS_LOADERS = frozenset({"NPU410"})  # ... and the loader index


def attach_project_facts(plans: Iterable[RunPlan], files: Sequence[str], root: str) -> None:
    """Put the project facts the selected rules read into each plan's rule options (computed
    once, over `files`, for every plan that needs them)."""
    plans = list(plans)
    for needs, option, build in ((NEEDS_INDEX, INDEX_OPTION, _device_index),
                                 (NEEDS_LOADERS, LOADER_INDEX_OPTION, project_loader_index)):
        wanting = [plan for plan in plans if needs & set(plan.codes)]
        index = build(files, os.path.abspath(root)) if wanting else None
        if not index:
            continue
        for plan in wanting:
            plan.options = {**plan.options, option: index}
            plan._rulesets.clear()  # rule sets built before carry the old options


def _device_index(files: Sequence[str], root: str) -> dict:
    from codemods.framework.devicevalues import device_places

    return project_device_index(files, root, device_places())

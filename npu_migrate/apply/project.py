"""Facts about the whole project that single-file rules need, computed once per run.

Today: the device-value index (`codemods.framework.devicevalues.project_device_index`), which
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
from npu_migrate.apply.runner import RunPlan

NEEDS_INDEX = frozenset({"NPU500"})  # the rules that read the index


def attach_project_facts(plans: Iterable[RunPlan], files: Sequence[str], root: str) -> None:
    """Put the project facts the selected rules read into each plan's rule options (computed
    once, over `files`, for every plan that needs them)."""
    plans = [plan for plan in plans if NEEDS_INDEX & set(plan.codes)]
    if not plans:
        return
    from codemods.framework.devicevalues import device_places

    index = project_device_index(files, os.path.abspath(root), device_places())
    if not index:
        return
    for plan in plans:
        plan.options = {**plan.options, INDEX_OPTION: index}
        plan._rulesets.clear()  # rule sets built before carry the old options

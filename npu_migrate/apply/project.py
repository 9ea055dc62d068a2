"""Facts about the whole project that single-file rules need, computed once per run.

- the device-value index (`codemods.framework.devicevalues.project_device_index`), which says how
  other modules use a module's CUDA device constants (NPU500);
- the project's CUDA-only modules (`codemods.framework.cudaonly.project_cuda_only_modules`), whose
  functions a CUDA guard may select (NPU511).

Each is computed over *every*
discovered file, before `--changed-since` and `--shard` narrow the set to migrate, so a file's
result does not depend on which subset of the project a run looks at. It travels to the
workers in the run plan's rule options, so it is also part of the cache key: a change to how
any module uses an imported device constant invalidates the cached results (correct, if
coarse; such changes are rare).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from codemods.framework.cudaonly import PROJECT_OPTION, project_cuda_only_modules
from codemods.framework.devicevalues import INDEX_OPTION, project_device_index
from npu_migrate.apply.runner import RunPlan

def _device_index(files: Sequence[str], root: str) -> dict[str, Any]:
    from codemods.framework.devicevalues import device_places

    return project_device_index(files, root, device_places())


# (the rule that reads it, its rule-options key, how to compute it over the discovered files)
FACTS: list[tuple[str, str, Callable[[Sequence[str], str], dict[str, Any]]]] = [
    ("NPU500", INDEX_OPTION, _device_index),
    ("NPU511", PROJECT_OPTION, project_cuda_only_modules),
]


def attach_project_facts(groups: Iterable[tuple[RunPlan, Callable[[], Sequence[str]], str]]) -> None:
    """Put the project facts the selected rules read into each plan's rule options. A group is a
    plan, the files its facts are computed over (called only if some fact is needed) and the
    project root they are relative to; groups sharing a root share the computation."""
    computed: dict[tuple[str, str], dict[str, Any]] = {}
    for plan, files, root in groups:
        root = os.path.abspath(root)
        for code, key, compute in FACTS:
            if code not in set(plan.codes):
                continue
            if (key, root) not in computed:
                computed[(key, root)] = compute(files(), root)
            if computed[(key, root)]:
                plan.options = {**plan.options, key: computed[(key, root)]}
                plan._rulesets.clear()  # rule sets built before carry the old options

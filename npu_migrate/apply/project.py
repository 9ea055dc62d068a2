"""Facts about the whole project that single-file rules need, computed once per run.

- the device-value index (`codemods.analyses.devicevalues.project_device_index`), which says how
  other modules use a module's CUDA device constants, and the parameter index
  (`project_parameter_index`), where the parameters of functions other modules call with a CUDA
  literal go (NPU500);
- the project's CUDA-only modules (`codemods.analyses.cudaonly.project_cuda_only_modules`), whose
  functions a CUDA guard may select (NPU511), and the CUDA extensions it builds, whose imports
  NPU311 reports;
- the loader index (`codemods.analyses.loadervalues.project_loader_index`): helpers of other
  modules that return a pinning DataLoader (NPU410).

Also which `.json` files the code passes to DeepSpeed (`deepspeed_config_references`, NPU540).

Each is computed over *every*
discovered file, before `--changed-since` and `--shard` narrow the set to migrate, so a file's
result does not depend on which subset of the project a run looks at. It travels to the
workers in the run plan's rule options, so it is also part of the cache key: a change to how
any module uses an imported device constant invalidates the cached results (correct, if
coarse; such changes are rare).
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from codemods.analyses.cudaonly import PROJECT_OPTION, project_cuda_only_modules
from codemods.analyses.devicevalues import (
    INDEX_OPTION,
    PARAMETER_INDEX_OPTION,
    parse_source,
    project_device_index,
    project_parameter_index,
    read_source,
)
from codemods.analyses.loadervalues import LOADER_INDEX_OPTION, project_loader_index
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts
from npu_migrate.apply.runner import RunPlan


def _device_index(files: Sequence[str], root: str) -> dict[str, Any]:
    from codemods.analyses.devicevalues import device_places

    return project_device_index(files, root, device_places())


def _parameter_index(files: Sequence[str], root: str) -> dict[str, Any]:
    from codemods.analyses.devicevalues import device_places

    return project_parameter_index(files, root, device_places())


# (the rule that reads it, its rule-options key, how to compute it over the discovered files)
FACTS: list[tuple[str, str, Callable[[Sequence[str], str], dict[str, Any]]]] = [
    ("NPU500", INDEX_OPTION, _device_index),
    ("NPU500", PARAMETER_INDEX_OPTION, _parameter_index),
    ("NPU511", PROJECT_OPTION, project_cuda_only_modules),
    ("NPU311", PROJECT_OPTION, project_cuda_only_modules),  # the same facts: computed once
    ("NPU410", LOADER_INDEX_OPTION, project_loader_index),
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


# -- DeepSpeed configuration files the code points at (NPU540) -----------------------------------

_DEEPSPEED_KEYWORDS = frozenset({"deepspeed_config", "deepspeed", "ds_config", "deepspeed_config_file"})
_DEEPSPEED_FLAG = re.compile(r"--deepspeed(?:_config)?(?:=|\s+)[\"']?([^\s\"']+\.json)")
_FLAGS = ("--deepspeed_config", "--deepspeed")


def deepspeed_config_references(files: Sequence[str], root: str) -> set[str]:
    """Absolute paths of existing `.json` files that Python code or launch scripts pass to
    DeepSpeed: `deepspeed_config=` / `deepspeed=` / `ds_config=` keywords, `config=` of a
    `deepspeed.*` call, `--deepspeed_config x.json` / `--deepspeed x.json` (argument lists, argparse
    defaults, command strings, shell scripts). A relative path is tried against the file's
    folder, the project root and the working folder."""
    found: set[str] = set()
    for path in files:
        if not path.endswith((".py", ".sh", ".bash")):
            continue
        data = read_source(path)
        # plain substring tests first (a case-insensitive regex over every file costs more than the
        # rest): a reference names a .json file and says deepspeed or ds_config somewhere
        if data is None or b".json" not in data or not (
                b"eepspeed" in data or b"EEPSPEED" in data or b"ds_config" in data):
            continue
        text = data.decode("utf-8", "replace")
        names = {m.group(1) for m in _DEEPSPEED_FLAG.finditer(text)}
        if path.endswith(".py"):
            tree = parse_source(data)
            if tree is not None:
                names |= _python_references(tree)
        for name in names:
            for base in (os.path.dirname(os.path.abspath(path)), os.path.abspath(root), os.getcwd()):
                candidate = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(candidate):
                    found.add(candidate)
                    break
    return found


def _python_references(tree: ast.Module) -> set[str]:
    facts = FileFacts.from_tree(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):  # ["deepspeed", "--deepspeed_config", "ds.json"]
            names |= _after_flags(node.elts)
        if not isinstance(node, ast.Call):
            continue
        names |= _after_flags(node.args)
        parts = ast_dotted_parts(node.func)
        of_deepspeed = parts is not None and (facts.qualify(parts) or "").startswith("deepspeed.")
        flag_default = any(isinstance(a, ast.Constant) and a.value in _FLAGS for a in node.args)
        for keyword in node.keywords:
            if (keyword.arg in _DEEPSPEED_KEYWORDS or (of_deepspeed and keyword.arg in ("config", "config_params"))
                    or (flag_default and keyword.arg == "default")):
                names |= _json_constant(keyword.value)
    return names


def _after_flags(elements: Sequence[ast.expr]) -> set[str]:
    return {name for before, after in itertools.pairwise(elements)
            if isinstance(before, ast.Constant) and before.value in _FLAGS for name in _json_constant(after)}


def _json_constant(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".json"):
        return {node.value}
    return set()

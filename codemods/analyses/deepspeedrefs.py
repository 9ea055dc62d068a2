"""Which `.json` files a package root's code passes to DeepSpeed (NPU540's project fact).

NPU540 reads DeepSpeed configuration files. Among the `.json` files of a tree only those are
configurations that are named like one, matched by the configuration's `deepspeed-configs`
globs, named on the command line, or passed to DeepSpeed by the code of their package root:
`deepspeed_config=` / `deepspeed=` / `ds_config=` keywords, `config=` of a `deepspeed.*` call,
`--deepspeed_config x.json` / `--deepspeed x.json` (argument lists, argparse defaults, command
strings, shell scripts). The last is this fact: a file's summary is the `.json` names it passes,
the merge the existing files they name.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from collections.abc import Sequence
from typing import Any

from codemods.api.facts import Project, ProjectFact, SourceFile
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts
from npu_migrate.core.discovery import JSON_SUFFIXES, SHELL_SUFFIXES

_DEEPSPEED_KEYWORDS = frozenset({"deepspeed_config", "deepspeed", "ds_config", "deepspeed_config_file"})
_DEEPSPEED_FLAG = re.compile(r"--deepspeed(?:_config)?(?:=|\s+)[\"']?([^\s\"']+\.json)")
_FLAGS = ("--deepspeed_config", "--deepspeed")


class DeepSpeedReferences(ProjectFact):
    """The absolute paths of the existing `.json` files the root's Python code or launch scripts
    pass to DeepSpeed. A relative name is tried against the file's folder, the package root and
    the working folder."""

    key = "deepspeed_references"
    suffixes = (".py", *SHELL_SUFFIXES)
    chooses_among = JSON_SUFFIXES
    merges_from_summaries = False  # which of the named files exist is asked of the disk each time

    def summarize(self, source: SourceFile) -> list[str] | None:
        data = source.data
        # plain substring tests first (a case-insensitive regex over every file costs more than
        # the rest): a reference names a .json file and says deepspeed or ds_config somewhere
        if b".json" not in data or not (b"eepspeed" in data or b"EEPSPEED" in data or b"ds_config" in data):
            return None
        names = {m.group(1) for m in _DEEPSPEED_FLAG.finditer(data.decode("utf-8", "replace"))}
        if source.is_python and source.tree is not None:
            names |= _python_references(source.tree)
        return sorted(names) or None

    def merge(self, project: Project) -> list[str]:
        found: set[str] = set()
        for path, names in project.summaries(self):
            for name in names:
                for base in (os.path.dirname(path), project.root, os.getcwd()):
                    candidate = os.path.normpath(os.path.join(base, name))
                    if os.path.isfile(candidate):
                        found.add(candidate)
                        break
        return sorted(found)

    def slice(self, index: Any, path: str) -> Any:
        return None  # it decides which files a run reads, not what a rule says about them

    def chooses(self, index: Any, path: str) -> bool:
        return os.path.abspath(path) in index


DEEPSPEED_REFERENCES = DeepSpeedReferences()


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

"""NPU120: `torch.cuda.<name>` becomes `torch.npu.<name>` for every name torch_npu provides;
NPU121: a `torch.cuda` name with no NPU counterpart is reported with what to do instead.

The names are data (`codemods/data/torch_cuda.json`). Aliases are resolved: `th.cuda.X`,
`from torch.cuda import X` (the import moves to `torch.npu`; names without a counterpart stay
in a `torch.cuda` import of their own), and module aliases (`import torch.cuda as tc`,
`from torch import cuda`), whose import is repointed at `torch.npu` when every use of the
alias is a name we rewrite. A `torch.cuda.<name>` in neither list is left to other rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache

from codemods.data.tables import load_data
from codemods.model.filemodel import FileModel

DATA = "torch_cuda.json"


@dataclass(frozen=True)
class CudaNames:
    rewrites: dict[str, str]  # torch.cuda name -> attribute of torch.npu
    flags: dict[str, str]  # torch.cuda name -> what to do instead


@cache
def cuda_names() -> CudaNames:
    data = load_data(DATA)
    rewrites, flags = {}, {}
    for entry in data["entries"]:
        name = entry["cuda"].removeprefix("torch.cuda.")
        if entry["action"] == "rewrite":
            rewrites[name] = entry["npu"].removeprefix("torch.npu.")
        elif entry["action"] == "flag":
            flags[name] = entry["note"]
    return CudaNames(rewrites, flags)


@cache
def npu_names() -> frozenset[str]:
    """Every name of `torch_npu.npu.__all__` (fact sheet §2.1)."""
    return frozenset(n for group in load_data(DATA)["torch_npu_npu_all"].values() for n in group)


@cache
def excluded_names() -> dict[str, str]:
    """torch.cuda names another rule owns, with what it does about them."""
    return dict(load_data(DATA)["excluded_from_rewrite"])


# `torch.cuda.X`, `cuda.X`, `from torch.cuda import`, `from torch import cuda[,)]`, `... cuda as`
PREFILTER = r"\bcuda\b(?:\.[A-Za-z_]|\s*[,)]|\s+(?:import|as)\b)|import[^\n]*\bcuda\b"


@dataclass(frozen=True)
class AliasUse:
    """How a local name bound to the `torch.cuda` module is used in the whole file."""

    attrs: frozenset[str]
    bare: bool  # used other than as `alias.<name>`

    def blockers(self, rewrites: dict[str, str]) -> list[str]:
        found = sorted(self.attrs - rewrites.keys())
        return found + (["the module itself"] if self.bare else [])


def alias_uses(model: FileModel, local: str) -> AliasUse:
    """How the file uses `local` (from the model's shared walk: no walk of its own)."""
    attrs: set[str] = set()
    owners: set[int] = set()
    for node in model.of_type(ast.Attribute):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == local:
            attrs.add(node.attr)
            owners.add(id(node.value))
    loads = sum(1 for node in model.of_type(ast.Name) if isinstance(node, ast.Name) and node.id == local)
    return AliasUse(frozenset(attrs), loads > len(owners))

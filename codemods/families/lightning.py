"""Lightning names the framework rules (NPU520, NPU521) look for."""

from __future__ import annotations

import ast

import libcst as cst

from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts

_LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
ENTRY_POINTS = frozenset({"Trainer", "Fabric"})  # what takes `accelerator=`
CUDA_ACCELERATORS = frozenset({"cuda", "gpu"})  # accelerator names that select CUDA
# Lightning < 1.7 also took the distributed strategy as `accelerator=`; with `gpus=` it runs on
# CUDA (NCCL for the DDP family)
LEGACY_STRATEGY_ACCELERATORS = frozenset({"ddp", "ddp_spawn", "ddp2", "dp", "ddp_sharded", "ddp_sharded_spawn"})


def lightning_name(qualified: str | None, names: frozenset[str]) -> bool:
    if not qualified:
        return False
    parts = qualified.split(".")
    return parts[0] in _LIGHTNING_ROOTS and parts[-1] in names


def branches(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values an expression can take: both branches of `a if c else b`, else itself."""
    if isinstance(node, cst.IfExp):
        return branches(node.body) + branches(node.orelse)
    return [node]


def text_of(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def accelerator_variables(facts: FileFacts) -> frozenset[str]:
    """Names the file passes as `accelerator=<name>` to `Trainer`/`Fabric` (read with `ast`): a
    CUDA accelerator assigned to one of them selects Lightning's CUDA accelerator."""
    found = set()
    for node in ast.walk(facts.tree):
        if not isinstance(node, ast.Call):
            continue
        parts = ast_dotted_parts(node.func)
        if not parts or not lightning_name(facts.qualify(parts), ENTRY_POINTS):
            continue
        found |= {k.value.id for k in node.keywords if k.arg == "accelerator" and isinstance(k.value, ast.Name)}
    return frozenset(found)


def imports_lightning(facts: FileFacts) -> bool:
    """Whether the file imports Lightning (any of its roots) under some name."""
    return any(target.split(".")[0] in _LIGHTNING_ROOTS for target in facts.aliases.values())

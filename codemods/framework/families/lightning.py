"""Lightning names the framework rules (NPU520, NPU521) look for."""

from __future__ import annotations

import libcst as cst

_LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")


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

"""Shapes of code that moves tensors between host and device, read by both the file scan and
the training-loop analysis."""

from __future__ import annotations

import ast

# calls that build a tensor on the host from what they are given (a copy when it was on a device)
HOST_FACTORIES = frozenset({"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor"})


def device_like(node: ast.Call) -> bool:
    """`.to(x)` whose argument looks like a device (not a dtype)."""
    for arg in [*node.args[:1], *(k.value for k in node.keywords if k.arg == "device")]:
        if type(arg) is ast.Constant and isinstance(arg.value, (str, int)):
            return isinstance(arg.value, int) or "cuda" in arg.value or "npu" in arg.value
        text = ast.unparse(arg).lower()
        if "dev" in text or "cuda" in text or "rank" in text:
            return True
    return False

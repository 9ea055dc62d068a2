"""Uses of a CUDA compute capability that break on the NPU, where
`torch.npu.get_device_capability()` returns None (NPU180 reports them; NPU511 keeps a CUDA guard
whose branch makes one). Read from the file's `ast`: the engine may hand a call and the use of its
result over in different pieces."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from codemods.model.astnodes import ast_dotted_parts
from codemods.model.facts import FileFacts
from codemods.model.filemodel import FileModel

CAPABILITY_CALLS = frozenset({"torch.cuda.get_device_capability", "torch.npu.get_device_capability",
                              "torch_npu.npu.get_device_capability", "torch.accelerator.get_device_capability"})


def breaking_uses(node: ast.AST) -> list[tuple[ast.expr, str]]:
    """The operands of `node` that it uses in a way None does not support, with how."""
    if isinstance(node, ast.Compare) and not any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
        return [(operand, "compared") for operand in (node.left, *node.comparators)]
    if isinstance(node, ast.Subscript):
        return [(node.value, "indexed")]
    if isinstance(node, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
        return [(node.value, "unpacked")]
    if isinstance(node, ast.BinOp):
        return [(node.left, "used in arithmetic"), (node.right, "used in arithmetic")]
    return []


def _is_capability_call(node: ast.AST, facts: FileFacts) -> bool:
    if not isinstance(node, ast.Call):
        return False
    parts = ast_dotted_parts(node.func)
    return parts is not None and facts.qualify(parts) in CAPABILITY_CALLS


def kept_capabilities(scope: ast.AST, facts: FileFacts) -> dict[str, tuple[str, int]]:
    """Names `scope` assigns a get_device_capability() result, each with the first way it is then
    used in `scope` that breaks on None and that line (`capability >= (8, 0)`: ("compared", 3))."""
    nodes = list(ast.walk(scope))
    return _kept_in(nodes, nodes, facts)


def file_capabilities(model: FileModel) -> dict[str, tuple[str, int]]:
    """`kept_capabilities` of the whole file, read off the model's one walk (once per file)."""
    return _kept_in(model.of_type(ast.Assign), model.of_type(ast.Compare, ast.Subscript, ast.Assign, ast.BinOp),
                    model.facts)


def _kept_in(assigns: Iterable[ast.AST], users: Iterable[ast.AST], facts: FileFacts) -> dict[str, tuple[str, int]]:
    """`kept_capabilities` over the given nodes: `assigns` hold the assignments, `users` the
    nodes that may use a name (in `ast.walk`'s order: a tie on a line goes to the first)."""
    kept = {target.id for node in assigns
            if isinstance(node, ast.Assign) and _is_capability_call(node.value, facts)
            for target in node.targets if isinstance(target, ast.Name)}
    uses: dict[str, tuple[str, int]] = {}
    for node in users if kept else ():
        for operand, use in breaking_uses(node):
            if isinstance(operand, ast.Name) and operand.id in kept:
                known = uses.get(operand.id)
                if known is None or operand.lineno < known[1]:
                    uses[operand.id] = (use, operand.lineno)
    return uses


def capability_break(scope: ast.AST, facts: FileFacts) -> tuple[str, int] | None:
    """The first place in `scope` that uses a compute capability in a way None breaks, directly
    (`get_device_capability()[0] >= 8`) or through the name it is kept in: (how, line), or None."""
    found = [(f"{use}", operand.lineno) for node in ast.walk(scope) for operand, use in breaking_uses(node)
             if _is_capability_call(operand, facts)]
    found += [(f"kept in `{name}` and {use}", line) for name, (use, line) in kept_capabilities(scope, facts).items()]
    return min(found, key=lambda item: item[1]) if found else None

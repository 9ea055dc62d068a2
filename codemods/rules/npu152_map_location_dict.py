"""NPU152: the map-location-dict rule."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from codemods.analyses.devices import device_expr
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import code_of, string_value
from npu_migrate.core.diagnostics import Severity

# functions whose `map_location` maps saved storage locations: keyword, or this position
_LOADERS = {"torch.load": 1, "torch.serialization.load": 1, "torch.jit.load": 1}


_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


class MapLocation(CoverageRule):
    """## What it does

    `torch.load(map_location={"cuda:0": ...})`: values become NPU devices, NPU keys are added

    ## Why

    `torch.load(f, map_location={...})` maps the *saved* location of each storage to a new one.
    A checkpoint written on a GPU tags its storages `"cuda:N"`; one written after the port tags them
    `"npu:N"`. `transfer_to_npu` string-replaces keys and values alike, so a GPU checkpoint's
    `"cuda:1"` storages no longer match the rewritten key and only load because `Tensor.cuda` happens to
    be patched too. npu-migrate rewrites the **values** (where to put the storage) to NPU devices and
    keeps each CUDA **key**, adding the matching NPU key beside it, so checkpoints from either machine
    load the same way. Strings and `torch.device(...)` values of `map_location` are NPU103's.

    A function or lambda passed as `map_location` is reported (info): it sees `"cuda:N"` locations
    from GPU checkpoints and must hand back NPU or CPU storages; npu-migrate cannot check its body.
    Applies to `torch.load`, `torch.serialization.load` and `torch.jit.load`, by keyword or position.

    ## Example

    ```python
    # before
    sd = torch.load(path, map_location={"cuda:1": "cuda:0"})
    # after
    sd = torch.load(path, map_location={"cuda:1": "npu:0", "npu:1": "npu:0"})
    ```

    ## Fix safety

    Safe: a dict lookup of a missing key falls through to the saved location, so the added key changes nothing for GPU checkpoints; it makes NPU checkpoints behave like GPU ones did. Suppress a line with `# npu-migrate: ignore[NPU152]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU152"
    name = "map-location-dict"
    summary = "`torch.load(map_location={\"cuda:0\": ...})`: values become NPU devices, NPU keys are added"
    fix = Fix.SAFE
    needs_torch_npu = True
    severity = Severity.INFO
    # a keyword `map_location=`, or a dict or lambda as the second positional argument
    prefilter = r"map_location|load\s*\([^(),]*,\s*(?:\{|lambda)"
    gate_names = frozenset(_LOADERS)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        position = _LOADERS.get(self.resolve(original_node.func) or "")
        if position is None or len(original_node.args) != len(updated_node.args):
            return updated_node
        args = list(updated_node.args)
        index = 0
        for i, (orig, arg) in enumerate(zip(original_node.args, args)):
            if arg.star:
                return updated_node
            is_map = arg.keyword.value == "map_location" if arg.keyword else index == position
            index += arg.keyword is None
            if not is_map:
                continue
            if isinstance(arg.value, cst.Dict):
                new = self._dict(orig.value, arg.value)
                if new is not arg.value:
                    args[i] = arg.with_changes(value=new)
                    return updated_node.with_changes(args=args)
            elif self._is_function(orig.value):
                self.report(orig.value, "map_location is a function: storages saved on a GPU reach it with "
                            "locations 'cuda:N', and it must return NPU (or CPU) storages; check it, or pass "
                            "map_location=\"npu\"")
        return updated_node

    def _is_function(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Lambda):
            return not _keeps_storage_on_cpu(node)
        if isinstance(node, cst.Name):
            return any(isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == node.value
                       for stmt in self.context.facts.tree.body)
        return False

    def _dict(self, original: cst.CSTNode, node: cst.Dict) -> cst.Dict:
        """Values naming CUDA devices name NPU ones; a key naming a CUDA device (where a GPU
        checkpoint's storages come from) keeps its entry and gains the same entry for the
        matching NPU device, so checkpoints saved on either load alike."""
        elements = list(node.elements)
        keys = {string_value(e.key) for e in elements if isinstance(e, cst.DictElement)}
        out: list[cst.BaseDictElement] = []
        changed = False
        for element in elements:
            if not isinstance(element, cst.DictElement):
                out.append(element)
                continue
            value = device_expr(element.value)
            if value is not None:
                self.fixed(original, f"map_location value `{code_of(element.value)}` → `{code_of(value)}`")
                element = element.with_changes(value=value)
                changed = True
            out.append(element)
            npu_key = device_expr(element.key) if isinstance(element.key, cst.SimpleString) else None
            if npu_key is not None and string_value(npu_key) not in keys:
                out[-1] = element.with_changes(comma=_COMMA)
                out.append(cst.DictElement(key=npu_key, value=element.value))
                self.fixed(original, f"map_location gains `{code_of(npu_key)}` beside "
                                     f"`{code_of(element.key)}` (for checkpoints saved on NPU)")
                changed = True
        if not changed:
            return node
        last = elements[-1]
        if out[-1] is not last:  # keep the original closing style: trailing comma or not
            out[-1] = out[-1].with_changes(comma=last.comma)
        return node.with_changes(elements=out)


def _keeps_storage_on_cpu(node: cst.Lambda) -> bool:
    """`lambda storage, loc: storage`: the common idiom that loads everything to the CPU,
    which is right on NPU too."""
    params = node.params.params
    return (len(params) >= 1 and isinstance(node.body, cst.Name)
            and node.body.value == params[0].name.value)


CASES = [
    Invalid(
        """\
    import os
    import torch
    sd = torch.load(path, map_location={"cuda:1": "cuda:0"})
    """,
        after="""\
    import os
    import torch
    sd = torch.load(path, map_location={"cuda:1": "npu:0", "npu:1": "npu:0"})
    """,
    ),
    Valid(
        """\
    import os
    import torch
    sd = torch.load(path, map_location={"cuda:1": "npu:0", "npu:1": "npu:0"})
    """,
    ),
    Invalid(
        """\
    import torch
    sd = torch.load(f, map_location={'cuda:0': 'cpu'})
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    sd = torch.load(f, map_location={'cuda:0': 'cpu', 'npu:0': 'cpu'})
    """,
        codes=('NPU100', 'NPU152'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    sd = torch.load(f, {
        'cuda:0': 'cuda:1',
    })
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    sd = torch.load(f, {
        'cuda:0': 'npu:1', 'npu:0': 'npu:1',
    })
    """,
        codes=('NPU100', 'NPU152'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    sd = torch.jit.load(f, map_location={'cpu': 'cuda'})
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    sd = torch.jit.load(f, map_location={'cpu': 'npu'})
    """,
        codes=('NPU100', 'NPU152'),
        with_rules=('NPU100',),
    ),
]

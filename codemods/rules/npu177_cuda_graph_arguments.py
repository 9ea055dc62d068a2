"""NPU177: the cuda-graph-arguments rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from npu_migrate.core.diagnostics import Severity

# only CUDA spellings: a 4th positional argument of torch.npu.graph is auto_dispatch_capture
_GRAPH = frozenset({"torch.cuda.graph", "torch.cuda.graphs.graph"})


_GRAPH_POSITIONS = 3  # (graph, pool, stream) keep their places; capture_error_mode must be a keyword


_NPU_GRAPH_LACKS = ("enable_annotations", "check_input_liveness")


_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class CudaGraphArguments(CoverageRule):
    """## What it does

    `torch.cuda.graph(g, pool, stream, mode)`: arguments after `stream` become keywords for `torch.npu.graph`

    ## Why

    `torch.cuda.graph(cuda_graph, pool, stream, capture_error_mode, enable_annotations,
    check_input_liveness)` and `torch.npu.graph(npu_graph, pool, stream, auto_dispatch_capture,
    capture_error_mode)` differ after the third parameter (fact sheet §2.4): a fourth positional
    argument would land in `auto_dispatch_capture`. The rule makes it `capture_error_mode=...` and drops
    `enable_annotations=` / `check_input_liveness=` (absent on NPU), reporting each drop. It only acts
    on CUDA spellings, so a `torch.npu.graph` call with its own fourth argument is left alone.

    ## Example

    ```python
    # before
    with torch.cuda.graph(g, pool, stream, "thread_local"):
        ...
    # after
    with torch.npu.graph(g, pool, stream, capture_error_mode="thread_local"):
        ...
    ```

    ## Fix safety

    Safe: the argument reaches the same parameter; dropped keywords are reported. Suppress a line with `# npu-migrate: ignore[NPU177]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU177"
    name = "cuda-graph-arguments"
    summary = "`torch.cuda.graph(g, pool, stream, mode)`: arguments after `stream` become keywords for `torch.npu.graph`"
    fix = Fix.SAFE
    severity = Severity.WARNING
    # the rule acts on a 4th positional argument or on the two CUDA-only keywords
    prefilter = r"graph\s*\((?:[^()\n]*,){3}|enable_annotations|check_input_liveness"
    gate_names = _GRAPH

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) not in _GRAPH:
            return updated_node
        args = list(updated_node.args)
        if any(arg.star for arg in args):
            return updated_node
        positional = [i for i, arg in enumerate(args) if arg.keyword is None]
        changed = False
        if len(positional) > _GRAPH_POSITIONS:
            extra = positional[_GRAPH_POSITIONS:]
            if len(extra) > 1:
                self.report(original_node, "torch.npu.graph takes (npu_graph, pool, stream, "
                            "auto_dispatch_capture, capture_error_mode): pass the extra arguments by keyword")
                return updated_node
            index = extra[0]
            args[index] = args[index].with_changes(keyword=cst.Name("capture_error_mode"), equal=_EQUAL)
            self.fixed(original_node, "4th positional argument → `capture_error_mode=` (torch.npu.graph's "
                       "4th parameter is auto_dispatch_capture)")
            changed = True
        kept = [arg for arg in args if not (arg.keyword and arg.keyword.value in _NPU_GRAPH_LACKS)]
        if len(kept) != len(args):
            for arg in original_node.args:
                if arg.keyword and arg.keyword.value in _NPU_GRAPH_LACKS:
                    self.report(arg, f"torch.npu.graph has no `{arg.keyword.value}=`: dropped")
            if kept and args[-1] not in kept:
                kept[-1] = kept[-1].with_changes(comma=args[-1].comma)
            self.fixed(original_node, "dropped keywords torch.npu.graph does not take")
            args, changed = kept, True
        return updated_node.with_changes(args=args) if changed else updated_node


CASES = [
    Invalid(
        """\
    import os
    import torch
    with torch.cuda.graph(g, pool, stream, "thread_local"):
        ...
    """,
        after="""\
    import os
    import torch
    with torch.cuda.graph(g, pool, stream, capture_error_mode="thread_local"):
        ...
    """,
    ),
    Valid(
        """\
    import os
    import torch
    with torch.cuda.graph(g, pool, stream, capture_error_mode="thread_local"):
        ...
    """,
    ),
    Invalid(
        """\
    import torch
    with torch.cuda.graph(g, check_input_liveness=True, pool=p):
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    with torch.npu.graph(g, pool=p):
        pass
    """,
        codes=('NPU100', 'NPU176', 'NPU177'),
        with_rules=('NPU176', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    with torch.cuda.graph(g, pool=p, enable_annotations=True):
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    with torch.npu.graph(g, pool=p):
        pass
    """,
        codes=('NPU100', 'NPU176', 'NPU177'),
        with_rules=('NPU176', 'NPU100'),
    ),
]

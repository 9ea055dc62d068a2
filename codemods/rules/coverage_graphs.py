"""Graphs and compile backends: NPU175 `torch.compile(backend="cudagraphs")` -> `"npugraphs"`;
NPU176 CUDA graphs -> NPU graphs, with the inference-only caveat; NPU177 `torch.cuda.graph`'s
arguments in the order `torch.npu.graph` takes them (fact sheet §2.4)."""

from __future__ import annotations

from typing import Any

import libcst as cst

from npu_migrate.core.diagnostics import Severity
from codemods.framework.base import Fix
from codemods.rules.coverage_common import (CoverageRule, NameMapRule, load_data,
                                                        name_prefilter, string_value, with_string)

DATA = "coverage_graphs.json"
_COMPILE = frozenset({"torch.compile"})
_DYNAMO = frozenset({"torch._dynamo.optimize"})
# only CUDA spellings: a 4th positional argument of torch.npu.graph is auto_dispatch_capture
_GRAPH = frozenset({"torch.cuda.graph", "torch.cuda.graphs.graph"})
_GRAPH_POSITIONS = 3  # (graph, pool, stream) keep their places; capture_error_mode must be a keyword
_NPU_GRAPH_LACKS = ("enable_annotations", "check_input_liveness")
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class CompileBackend(CoverageRule):
    code = "NPU175"
    name = "compile-backend"
    summary = "`torch.compile(backend=\"cudagraphs\")` becomes `backend=\"npugraphs\"`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"cudagraphs|tensorrt"

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        data = load_data(DATA)
        self.backends: dict[str, str] = data["compile_backends"]
        self.flags: dict[str, str] = data["compile_backend_flags"]

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        qualified = self.resolve(original_node.func)
        if qualified not in _COMPILE and qualified not in _DYNAMO:
            return updated_node
        args = list(updated_node.args)
        for index, (orig, arg) in enumerate(zip(original_node.args, args)):
            is_backend = (arg.keyword is not None and arg.keyword.value == "backend") or (
                qualified in _DYNAMO and index == 0 and arg.keyword is None and not arg.star)
            value = string_value(orig.value) if is_backend else None
            if value in self.flags:
                self.report(orig.value, self.flags[value], severity=Severity.WARNING)
            elif value in self.backends and isinstance(arg.value, cst.SimpleString):
                args[index] = arg.with_changes(value=with_string(arg.value, self.backends[value]))
                self.fixed(orig.value, f"backend `\"{value}\"` → `\"{self.backends[value]}\"`")
                return updated_node.with_changes(args=args)
        return updated_node


class CudaGraphs(NameMapRule):
    code = "NPU176"
    name = "cuda-graphs"
    summary = "`torch.cuda.CUDAGraph` / `graph` / `make_graphed_callables` become NPU graphs (inference only)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU176")


class CudaGraphArguments(CoverageRule):
    code = "NPU177"
    name = "cuda-graph-arguments"
    summary = "`torch.cuda.graph(g, pool, stream, mode)`: arguments after `stream` become keywords for `torch.npu.graph`"
    fix = Fix.SAFE
    severity = Severity.WARNING
    # the rule acts on a 4th positional argument or on the two CUDA-only keywords
    prefilter = r"graph\s*\((?:[^()\n]*,){3}|enable_annotations|check_input_liveness"

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

"""NPU301-NPU314: CUDA-only third-party code (apex, flash-attn, xformers, bitsandbytes, Triton,
CuPy, NVML, CUDA extensions, channels_last, ...) is reported with its NPU route.

Nothing here rewrites: none of these mappings is exact (argument meanings, return values or
numerics differ), so each report says what to write instead. Entries live in
`data/third_party.json`; an import is reported once, by the most specific entry that names it,
and a call or attribute use where an entry asks for it. `cu_file_diagnostic` is the report for
a `.cu`/`.cuh` file found while walking a tree.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from collections.abc import Iterable
from typing import Any

import libcst as cst
import libcst.matchers as m

from npu_migrate.core.diagnostics import Diagnostic, Severity
from npu_migrate.core.discovery import CUDA_SUFFIXES
from codemods.framework import envmap
from codemods.framework.base import Fix, Rule, dotted_parts

_IGNORED_TOKENS = {"load", "load_inline", "jit", "cuda"}


@cache
def entries() -> tuple[dict[str, Any], ...]:
    return tuple(envmap.load("third_party.json")["entries"])


@cache
def _heads() -> frozenset[str]:
    return frozenset(e["cuda"].split(".")[0] for e in entries() if e["at"])


def best_import_entry(qualified: str) -> dict[str, Any] | None:
    """The most specific entry naming `qualified` (or a module above it) for import reports."""
    found = [e for e in entries() if "import" in e["at"]
             and (qualified == e["cuda"] or qualified.startswith(e["cuda"] + "."))]
    return max(found, key=lambda e: len(e["cuda"]), default=None)


def cu_file_diagnostic(path: str) -> Diagnostic:
    """The report for a CUDA source file (`.cu`/`.cuh`) met during discovery (NPU312)."""
    entry = next(e for e in entries() if e["code"] == "NPU312")
    return Diagnostic("NPU312", entry["message"], path, 0, 0, Severity.WARNING)


def _prefilter(code: str) -> str:
    """Import statements always spell the top module; a call or attribute use through an alias
    spells `.last_name`. Generic words (`torch`, `load`, `jit`, `cuda`) would match most files.
    Plain literals, no leading `\\b`: a literal start lets `re` skip ahead fast."""
    words: set[str] = set()
    for entry in entries():
        if entry["code"] != code or not entry["at"]:
            continue
        parts = entry["cuda"].split(".")
        if parts[0] != "torch":
            words.add(re.escape(parts[0]))
        if {"call", "reference"} & set(entry["at"]) and parts[-1] not in _IGNORED_TOKENS:
            # torch names may be imported by name (`from torch import channels_last`)
            words.add(re.escape(parts[-1]) if parts[0] == "torch" else r"\." + re.escape(parts[-1]))
    if code == "NPU311":
        words |= {r"\.cuh?[\"']", "cuda_sources", "with_cuda", "cpp_extension"}
    return "|".join(sorted(words)) if words else r"(?!)"


def _import_name(node: cst.BaseExpression) -> str | None:
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


class _ThirdPartyRule(Rule):
    fix = Fix.NONE
    severity = Severity.WARNING
    default = True

    def _entries(self, at: str) -> list[dict[str, Any]]:
        return [e for e in entries() if e["code"] == self.code and at in e["at"]]

    def _qualify(self, node: cst.BaseExpression) -> str | None:
        parts = dotted_parts(node)
        if not parts:
            return None
        # FileFacts forgets a module alias once an assignment goes through it (`torch.x.y = ...`):
        # a chain spelled from a known library's own name still counts
        qualified = self.context.facts.qualify(parts)
        if qualified is None and parts[0] in _heads() and parts[0] in self._imported_heads():
            qualified = ".".join(parts)
        return qualified

    def _imported_heads(self) -> set[str]:
        heads = getattr(self, "_heads_cache", None)
        if heads is None:
            heads = {alias.name.split(".")[0] for node in ast.walk(self.context.facts.tree)
                     if isinstance(node, ast.Import) for alias in node.names if alias.asname is None}
            self._heads_cache = heads
        return heads

    def _report_import(self, node: cst.CSTNode, qualified: str) -> None:
        entry = best_import_entry(qualified)
        if entry is not None and entry["code"] == self.code:
            self.report(node, f"`{qualified}`: {entry['message']}")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = _import_name(alias.name)
            if name:
                self._report_import(alias, name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = _import_name(node.module)
        if not module:
            return
        if isinstance(node.names, cst.ImportStar):
            self._report_import(node, module)
            return
        for alias in node.names:
            name = _import_name(alias.name)
            if name:
                self._report_import(alias, f"{module}.{name}")

    def visit_Call(self, node: cst.Call) -> None:
        self._report_call(node)

    def _report_call(self, node: cst.Call) -> bool:
        """Report a call an entry names; whether one was reported."""
        wanted = self._entries("call")
        if not wanted:
            return False
        name = self._qualify(node.func)
        for entry in wanted:
            if entry["cuda"] != name:
                continue
            if "import" in entry["at"] and isinstance(node.func, cst.Name):
                continue  # imported by name: the import statement carries the report
            if entry.get("when") == "cuda_sources" and not _builds_cuda(node):
                if entry.get("message_computed") and _computed_sources(node):
                    self.report(node, entry["message_computed"])
                    return True
                continue
            self.report(node, entry["message"])
            return True
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        wanted = self._entries("reference")
        if wanted:
            name = self._qualify(node)
            for entry in wanted:
                if entry["cuda"] == name:
                    self.report(node, entry["message"])


def _cu_strings(call: cst.Call) -> list[cst.SimpleString]:
    """`.cu`/`.cuh` string literals among a call's arguments, not those of calls nested in them."""
    return _cu_strings_in(arg.value for arg in call.args)


def _cu_strings_in(nodes: Iterable[cst.CSTNode]) -> list[cst.SimpleString]:
    found: list[cst.SimpleString] = []
    stack: list[cst.CSTNode] = list(nodes)[::-1]  # popped in source order
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleString):
            if node.raw_value.endswith(CUDA_SUFFIXES):
                found.append(node)
        elif not isinstance(node, (cst.Call, cst.Lambda)):
            stack.extend(reversed(node.children))
    return found


def _computed_sources(call: cst.Call) -> bool:
    """Whether a load(...) call's sources are computed (not a literal list of strings)."""
    for index, arg in enumerate(call.args):
        if (arg.keyword and arg.keyword.value == "sources") or (arg.keyword is None and index == 1):
            value = arg.value
            if isinstance(value, (cst.List, cst.Tuple)):
                return not all(isinstance(e.value, cst.SimpleString) for e in value.elements)
            return not isinstance(value, cst.SimpleString)
    return False


def _builds_cuda(call: cst.Call) -> bool:
    """Whether a cpp_extension load/load_inline call compiles CUDA code."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword else None
        if keyword in ("cuda_sources", "extra_cuda_cflags") and not m.matches(arg.value, m.Name("None")):
            return True
        if keyword == "with_cuda" and m.matches(arg.value, m.Name("True")):
            return True
        for string in m.findall(arg.value, m.SimpleString()):
            assert isinstance(string, cst.SimpleString)
            if string.raw_value.endswith(CUDA_SUFFIXES):
                return True
    return False


class ApexAmp(_ThirdPartyRule):
    code = "NPU301"
    name = "apex-amp"
    summary = "apex (amp and the package as a whole) is CUDA-only: native AMP with torch.autocast('npu') + GradScaler('npu')"
    prefilter = _prefilter("NPU301")


class ApexFusedOptimizer(_ThirdPartyRule):
    code = "NPU302"
    name = "apex-fused-optimizer"
    summary = "apex FusedAdam/FusedLAMB/FusedSGD are CUDA kernels: use torch.optim"
    prefilter = _prefilter("NPU302")


class ApexParallel(_ThirdPartyRule):
    code = "NPU303"
    name = "apex-parallel"
    summary = "apex DistributedDataParallel/SyncBatchNorm: use torch DDP (hccl) and torch.nn.SyncBatchNorm"
    prefilter = _prefilter("NPU303")


class ApexFusedLayers(_ThirdPartyRule):
    code = "NPU304"
    name = "apex-fused-layers"
    summary = "apex fused layers (FusedLayerNorm, FusedRMSNorm, contrib): use torch.nn layers or torch_npu fused ops"
    prefilter = _prefilter("NPU304")


class FlashAttn(_ThirdPartyRule):
    code = "NPU305"
    name = "flash-attn"
    summary = "flash-attn: use torch_npu.npu_fusion_attention (layout, scale, keep_prob and mask spelled out) or SDPA"
    prefilter = _prefilter("NPU305")


class Xformers(_ThirdPartyRule):
    code = "NPU306"
    name = "xformers"
    summary = "xformers attention: use torch_npu.npu_fusion_attention or scaled_dot_product_attention"
    prefilter = _prefilter("NPU306")


class Bitsandbytes(_ThirdPartyRule):
    code = "NPU307"
    name = "bitsandbytes"
    summary = "bitsandbytes has no NPU backend: torch.optim and fp16/bf16 layers"
    prefilter = _prefilter("NPU307")


class TritonKernel(_ThirdPartyRule):
    code = "NPU308"
    name = "triton-kernel"
    summary = "hand-written Triton kernels do not run on NPU: PyTorch ops or an Ascend C operator"
    prefilter = _prefilter("NPU308")


class Cupy(_ThirdPartyRule):
    code = "NPU309"
    name = "cupy"
    summary = "CuPy arrays and kernels are CUDA-only: torch tensors on the NPU or numpy"
    prefilter = _prefilter("NPU309")


class Nvml(_ThirdPartyRule):
    code = "NPU310"
    name = "nvml"
    summary = "pynvml/GPUtil/gpustat query NVIDIA's driver (NVML, nvidia-smi): use torch.npu.device_count/mem_get_info/utilization"
    prefilter = _prefilter("NPU310")


class CudaExtension(_ThirdPartyRule):
    code = "NPU311"
    name = "cuda-extension"
    summary = "CUDAExtension and cpp_extension.load(...) of .cu sources cannot build for NPU: Ascend C operator"
    prefilter = _prefilter("NPU311")

    def visit_Call(self, node: cst.Call) -> None:
        strings = _cu_strings(node)
        if self._report_call(node):  # its .cu strings are covered by this report
            self.tree.nodes("seen").update(m.findall(node, m.SimpleString()))
            return
        self._report_sources(node, strings, "passes")  # e.g. a project's own build helper

    def visit_List(self, node: cst.List) -> None:
        self._report_sources(node, _cu_strings_in(node.elements), "names")

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._report_sources(node, _cu_strings_in(node.elements), "names")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.raw_value.endswith(CUDA_SUFFIXES):
            self._report_sources(node, [node], "names")

    def _report_sources(self, node: cst.CSTNode, strings: list[cst.SimpleString], verb: str) -> None:
        seen = self.tree.nodes("seen")
        fresh = [s for s in strings if s not in seen]
        if not fresh:
            return
        seen.update(strings)
        entry = next(e for e in entries() if e["code"] == self.code and e["cuda"].startswith("`.cu`"))
        names = ", ".join(f"`{s.raw_value}`" for s in fresh[:3])
        self.report(node, f"{verb} CUDA sources ({names}): {entry['message']}")


class CudaSourceFile(_ThirdPartyRule):
    code = "NPU312"
    name = "cuda-source-file"
    summary = "`.cu`/`.cuh` files in the tree cannot be compiled for NPU (reported by file discovery)"
    language = "cuda"  # a text rule over CUDA sources: the engine hands it `.cu`/`.cuh` files
    prefilter = ""

    def rewrite_text(self, text: str) -> str:
        self.context.diagnostics.append(cu_file_diagnostic(self.context.path))
        return text


class ChannelsLast(_ThirdPartyRule):
    code = "NPU313"
    name = "channels-last"
    summary = "`torch.channels_last` is unsupported by Ascend's auto-migration: drop it unless measured on NPU"
    prefilter = _prefilter("NPU313")


class OtherCudaLibrary(_ThirdPartyRule):
    code = "NPU314"
    name = "cuda-only-library"
    summary = "Other CUDA-only libraries (PyCUDA, numba.cuda, TensorRT, Transformer Engine) have no NPU path"
    prefilter = _prefilter("NPU314")

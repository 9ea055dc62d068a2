"""NPU311: the cuda-extension rule."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import libcst as cst

from codemods.analyses.cudaonly import CUDA_ONLY_MODULES, PROJECT_OPTION, is_extension_loader, last_part
from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, best_import_entry, entries, library_prefilter
from codemods.model.cstnodes import dotted_name, find_all
from npu_migrate.core.discovery import CUDA_SUFFIXES


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


class CudaExtension(ThirdPartyRule):
    """## What it does

    CUDAExtension and cpp_extension.load(...) of .cu sources cannot build for NPU: Ascend C operator

    ## Why

    CUDA extensions (`CUDAExtension`, `cpp_extension.load(...)` with `.cu` sources or `with_cuda=True`, `load_inline(cuda_sources=...)`, code keyed on `CUDA_HOME`, and any other `.cu`/`.cuh` path named in Python, such as a `sources = [...]` list handed to a project's own build helper; a `load(...)` whose sources are computed is reported as possibly CUDA; and every import of a module the project builds with `CUDAExtension`, such as Swin-Transformer's `import swin_window_process`, found from the project's setup scripts once per run) cannot be built or run on NPU, and torch_npu has no equivalent (fact sheet §2.6): the kernels must be ported to an Ascend C custom operator or an op-plugin adaptation, or replaced by PyTorch ops. C++-only extensions (`CppExtension`, `load` of `.cpp` files) still build and are not reported.

    *name*: the bare `CUDA_HOME` / `CUDAExtension` wherever the project binds or uses it, through
    its own wrapper, alias or re-export (mmcv's `parrots_wrapper._get_cuda_home()`,
    `CUDA_HOME = _get_cuda_home()`, `from .parrots_wrapper import CUDAExtension`): one report per
    statement, unless the import, call or reference report above already names it.

    ## Example

    ```python
    from torch.utils.cpp_extension import load
    ext = load("fused", sources=["fused.cpp", "fused_kernel.cu"])   # NPU311
    ```

    Port `fused_kernel.cu` to an Ascend C operator, or replace the extension by PyTorch ops.

    ## Fix safety

    No fix: diagnostic only (warning). None of these mappings is exact enough to rewrite automatically; the message says what to write instead. Suppress a line with `# npu-migrate: ignore[NPU311]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU311"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-extension"
    summary = "CUDAExtension and cpp_extension.load(...) of .cu sources cannot build for NPU: Ascend C operator"
    prefilter = library_prefilter("NPU311")
    project_facts = (CUDA_ONLY_MODULES,)

    @classmethod
    def project_prefilter(cls, options: Mapping[str, Any]) -> str | None:
        """An import line naming one of the project's CUDA extensions (their names come from the
        project's setup scripts: `project_cuda_only_modules`)."""
        names = sorted({last_part(n) for n in _extensions(options)})
        return rf"(?:import|from)[ \t][^\n]*\b(?:{'|'.join(map(re.escape, names))})\b" if names else None

    def visit_Import(self, node: cst.Import) -> None:
        super().visit_Import(node)
        for alias in node.names:
            self._report_extension(alias, dotted_name(alias.name) or "", relative=False)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        super().visit_ImportFrom(node)
        module = dotted_name(node.module) or ""
        if module and self._report_extension(node, module, relative=bool(node.relative)):
            return
        for alias in node.names if not isinstance(node.names, cst.ImportStar) else ():
            name = dotted_name(alias.name) or ""
            self._report_extension(alias, f"{module}.{name}" if module else name, relative=bool(node.relative))

    def _report_extension(self, node: cst.CSTNode, imported: str, relative: bool) -> bool:
        """`import swin_window_process`, where the project's setup script builds
        `swin_window_process` with CUDAExtension: on an Ascend host the module cannot exist."""
        extensions = _extensions(self.context.options)
        name = next((n for n in sorted(extensions)
                     if (last_part(n) == last_part(imported) if relative else n == imported)), None)
        if name is None:
            return False
        self.report(node, f"imports {extensions[name]}: it cannot be built or loaded on NPU, so this import "
                          "fails there; port its kernels to an Ascend C custom operator (or op-plugin), or fall "
                          "back to PyTorch ops on the NPU path")
        return True

    def visit_Call(self, node: cst.Call) -> None:
        strings = _cu_strings(node)
        if self._report_call(node) or self._report_loader(node):  # its .cu strings are covered by this report
            self.tree.nodes("seen").update(find_all(node, cst.SimpleString))
            return
        self._report_sources(node, strings, "passes")  # e.g. a project's own build helper

    def _report_loader(self, node: cst.Call) -> bool:
        """mmcv's `ext_loader.load_ext(...)`, also through a vendored copy's relative import
        (`from ..utils import ext_loader`), which no import alias resolves."""
        callee = dotted_name(node.func)
        if not callee or not is_extension_loader(callee) or self._qualify(node.func) is not None:
            return False  # an import-resolved `mmcv.utils.ext_loader.load_ext` is `_report_call`'s
        entry = next(e for e in entries() if e.get("code") == self.code and e["cuda"].endswith(".load_ext"))
        self.report(node, entry["message"])
        return True

    # the bare names of `name` entries (`CUDA_HOME`, `CUDAExtension`), wherever the project binds
    # or uses them: one report per statement, where no import or reference report covers them
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._report_names([node])

    def visit_If(self, node: cst.If) -> None:
        self._report_names([node.test])

    def visit_While(self, node: cst.While) -> None:
        self._report_names([node.test])

    def visit_For(self, node: cst.For) -> None:
        self._report_names([node.target, node.iter])

    def visit_With(self, node: cst.With) -> None:
        self._report_names(list(node.items))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._report_names([*node.bases, *node.keywords])

    def _report_names(self, parts: list[cst.CSTNode]) -> None:
        wanted = _named_entries()
        mentioned = getattr(self, "_mentioned", None)
        if mentioned is None:  # most files that reach here name none of them: one text search
            mentioned = self._mentioned = {name for name in wanted if name in self.context.source}
        if not mentioned:
            return
        for part in parts:
            for name in find_all(part, cst.Name):
                entry = wanted.get(name.value) if name.value in mentioned else None
                if entry is not None and not self._covered(parts, name, entry):
                    self.report(name, f"`{name.value}` (torch's `{entry['cuda']}`, or the project's own "
                                      f"wrapper or re-export of it): {entry['message']}")
                    return

    def _covered(self, parts: list[cst.CSTNode], name: cst.Name, entry: dict[str, Any]) -> bool:
        """Whether an import, call or reference report of this rule already names it."""
        if self.resolve(name) == entry["cuda"]:
            return True  # imported straight from torch in this file: the import's report names it
        for part in parts:
            for small in part.body if isinstance(part, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None \
                        and not isinstance(small.names, cst.ImportStar) \
                        and any(alias.name is name for alias in small.names):
                    module = dotted_name(small.module)
                    return bool(module) and best_import_entry(f"{module}.{name.value}") is not None
            called = {id(call.func) for call in find_all(part, cst.Call)}
            for attribute in find_all(part, cst.Attribute):
                if attribute.attr.value == name.value and attribute.attr is name and self._qualify(attribute) == entry["cuda"] \
                        and ("reference" in entry["at"] or id(attribute) in called):
                    return True  # `cpp_extension.CUDA_HOME`: the reference (or call) report names it
        return False

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
        entry = next(e for e in entries() if e.get("code") == self.code and e["cuda"].startswith("`.cu`"))
        names = ", ".join(f"`{s.raw_value}`" for s in fresh[:3])
        self.report(node, f"{verb} CUDA sources ({names}): {entry['message']}")


@cache
def _named_entries() -> dict[str, dict[str, Any]]:
    """`name` entries of this rule by their last name (`CUDA_HOME`, `CUDAExtension`)."""
    return {e["cuda"].rsplit(".", 1)[-1]: e for e in entries() if e.get("code") == "NPU311" and "name" in e["at"]}


def _extensions(options: Mapping[str, Any]) -> Mapping[str, str]:
    return (options.get(PROJECT_OPTION) or {}).get("extensions") or {}


CASES = [
    Invalid(
        """\
import os
import torch
from torch.utils.cpp_extension import load
ext = load("fused", sources=["fused.cpp", "fused_kernel.cu"])
""",
    ),
    # mmcv's build-environment probes: `CUDA_HOME` and `CUDAExtension` through its own wrapper
    # (`parrots_wrapper.py`, `env.py`, the re-export in `utils/__init__.py`)
    Invalid(
        """\
import os.path as osp
from .parrots_wrapper import BuildExtension, CppExtension, CUDAExtension, _get_cuda_home


def _get_cuda_home():
    from torch.utils.cpp_extension import CUDA_HOME
    return CUDA_HOME


def collect_env(env_info):
    CUDA_HOME = _get_cuda_home()
    if CUDA_HOME is not None and osp.isdir(CUDA_HOME):
        env_info['NVCC'] = osp.join(CUDA_HOME, 'bin/nvcc')
""",
    ),
    # ControlNet's vendored mmcv (annotator/uniformer/mmcv/ops/*.py)
    Invalid(
        """\
import torch
from ..utils import ext_loader
ext_module = ext_loader.load_ext('_ext', ['furthest_point_sampling_forward'])
""",
    ),
    Valid(
        """\
from torch.utils.cpp_extension import BuildExtension, CppExtension
ext = CppExtension("fused", ["fused.cpp"])
""",
    ),
]

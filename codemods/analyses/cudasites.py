"""Where a Python file still does something only CUDA can do: an `ast` scan, no LibCST.

The final sweep (NPU599) runs this over the *migrated* text of a file, so whatever is found
here is a construct no rule rewrote. A site is code, never a comment, a docstring or text that
only mentions CUDA: a string counts only when it has the exact shape of a device (`"cuda"`,
`"cuda:0"`, `"cuda:%d"`, `f"cuda:{i}"`), a backend (`"nccl"`), a CUDA environment variable, an
ONNX Runtime CUDA provider or a dotted `torch.cuda.*` target (mock targets), and it is not an
argument of print/logging or an argparse `help=` text.

Kinds of site:
- `api`: a name reached through an import whose path names CUDA (`torch.cuda.X`,
  `torch.backends.cudnn.X`, `torch.version.cuda`, `CUDAExtension`, `CUDAAccelerator`, `nccl`;
  importing `torch.backends.cudnn` itself is harmless on NPU and no site: its flags are, where set);
- `method`: `x.cuda(...)` calls and `x.is_cuda`;
- `string`: the device/backend/env/provider/target strings above;
- `library`: imports of CUDA-only libraries (apex, TensorRT, PyCUDA, CuPy, bitsandbytes, ...);
- `keyword`: framework switches that select CUDA (`accelerator="gpu"`, `gpus=`, `no_cuda=`);
- `scheduler`: a job's GPU request to the cluster (submitit's `gpus_per_node=`, SLURM's
  `--gpus-per-node`), which asks the scheduler for GPUs an Ascend node does not have.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from codemods.data.catalogue import cuda_only_library
from codemods.model.astnodes import ast_dotted_parts, call_name, iter_statements
from codemods.model.facts import FileFacts

# the frameworks whose CUDA-named API the sweep knows to be CUDA-specific
KNOWN_ROOTS = frozenset({"torch", "torchvision", "torchaudio", "lightning", "pytorch_lightning", "lightning_fabric",
                         "transformers", "accelerate", "deepspeed", "timm", "numba", "onnxruntime"})
# a part of an imported name that says CUDA (`cuda`, `cudnn`, `CUDAExtension`, `nccl`, `NCCL`)
_CUDA_PART = re.compile(r"cuda|cudnn|nccl|cublas|cufft|nvtx", re.IGNORECASE)
DEVICE_STRING = re.compile(r"cuda(:\d*)?|cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis]|\{[^{}]*\})")
_ENV_VAR = re.compile(r"(CUDA|NCCL|CUDNN|CUBLAS|CUBLASLT|NVIDIA|NVTE)_[A-Z0-9_]+"
                      r"|(PYTORCH|TORCH)_(CUDA|NCCL|CUDNN)_[A-Z0-9_]+|CUDA_HOME|CUDA_PATH")
_PROVIDERS = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})
_TARGET = re.compile(r"torch\.(cuda|backends\.cudnn|backends\.cuda)(\.[\w.]*)?")
_TEXT_CALLS = frozenset({"print", "debug", "info", "warning", "warn", "error", "critical", "exception",
                         "log", "write", "echo", "secho", "format_exc", "assertIn", "fail", "skip"})
_TEXT_KEYWORDS = frozenset({"help", "msg", "message", "description", "reason", "desc", "title", "label"})
# modules whose import is harmless on NPU: `torch.backends.cudnn` exists in every torch build and its
# flags are reported where they are set (NPU161); the import itself is no site
_HARMLESS_IMPORTS = frozenset({"torch.backends.cudnn"})
_CUDA_KEYWORDS = {"accelerator": re.compile(r"cuda|gpu|auto"), "gpus": None, "no_cuda": None,
                  "use_cuda": None}
# submitit's executor parameters that become SLURM `--gpus-per-node` / `--gpus-per-task`
_SCHEDULER_KEYWORDS = frozenset({"gpus_per_node", "gpus_per_task", "slurm_gpus_per_node", "slurm_gpus_per_task"})


@dataclass(frozen=True)
class Site:
    line: int
    col: int  # 1-based
    kind: str
    construct: str  # how the code spells it, short


def _string_kind(value: str) -> str | None:
    if DEVICE_STRING.fullmatch(value):
        return "device string"
    if value.lower() == "nccl":
        return "NCCL backend"
    if _ENV_VAR.fullmatch(value):
        return "CUDA environment variable"
    if value in _PROVIDERS:
        return "ONNX Runtime CUDA provider"
    if _TARGET.fullmatch(value):
        return "torch.cuda target"
    return None



class _Scanner(ast.NodeVisitor):
    def __init__(self, facts: FileFacts, lines: list[int] | None = None) -> None:
        self.facts = facts
        self.sites: list[Site] = []
        self._skip: set[int] = set()  # ids of string nodes that are text (docstrings, logs)
        self._lines = lines  # sorted lines that can hold a site; None: all

    def generic_visit(self, node: ast.AST) -> None:
        """As NodeVisitor's, but statements on no candidate line are not entered (a big class
        with one CUDA line costs one statement, not the class)."""
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and (not isinstance(item, ast.stmt) or self._holds(item)):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _holds(self, stmt: ast.stmt) -> bool:
        if self._lines is None:
            return True
        at = bisect.bisect_left(self._lines, min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())]))
        return at < len(self._lines) and self._lines[at] <= (stmt.end_lineno or stmt.lineno)

    def add(self, node: ast.AST, kind: str, construct: str) -> None:
        self.sites.append(Site(node.lineno, node.col_offset + 1, kind, construct))  # type: ignore[attr-defined]

    # -- statements whose first string is a docstring -------------------------------------------
    def _docstring(self, body: list[ast.stmt]) -> None:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            self._skip.add(id(body[0].value))

    def visit_Module(self, node: ast.Module) -> None:
        self._docstring(node.body)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._docstring(node.body)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            return  # a bare string statement is documentation, wherever it stands
        self.generic_visit(node)

    # -- imports ---------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        if self._import(node, node.module):
            return
        for alias in node.names:
            if f"{node.module}.{alias.name}" in _HARMLESS_IMPORTS:
                continue
            if node.module.split(".")[0] in KNOWN_ROOTS and _CUDA_PART.search(alias.name):
                self.add(node, "api", f"from {node.module} import {alias.name}")

    def _import(self, node: ast.stmt, module: str) -> bool:
        if module in _HARMLESS_IMPORTS:
            return True  # handled: not a site, and nothing imported from it is either
        top = module.split(".")[0]
        if cuda_only_library(module):
            self.add(node, "library", f"import {module}")
            return True
        if top in KNOWN_ROOTS and any(_CUDA_PART.search(part) for part in module.split(".")[1:]):
            self.add(node, "api", f"import {module}")
            return True
        return False

    # -- names ---------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        parts = ast_dotted_parts(node)
        if parts is None:
            if node.attr == "is_cuda":
                self.add(node, "method", ".is_cuda")
            self.generic_visit(node)
            return
        self._chain(node, parts)  # the whole chain at once: `torch.cuda.amp.autocast` is one site

    def visit_Name(self, node: ast.Name) -> None:
        self._chain(node, [node.id])

    def _chain(self, node: ast.expr, parts: list[str]) -> None:
        qualified = self.facts.qualify(parts)
        # names of the frameworks the rules know; a CUDA-only library's names are not sites of
        # their own (its import is), nor are an in-house library's (its plugin rules decide)
        if (qualified is not None and qualified.split(".")[0] in KNOWN_ROOTS
                and any(_CUDA_PART.search(part) for part in qualified.split(".")[1:])):
            self.add(node, "api", qualified)
            return
        if parts[-1] == "is_cuda" and len(parts) > 1:
            self.add(node, "method", ".is_cuda")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda":
            parts = ast_dotted_parts(func)
            qualified = self.facts.qualify(parts) if parts else None
            if qualified is None or not qualified.startswith("torch."):
                self.add(func, "method", ".cuda()")
                self.visit(func.value)
                self._arguments(node)
                return
        if call_name(func) in _TEXT_CALLS:
            self._text(node.args + [k.value for k in node.keywords])
        self.visit(func)
        self._arguments(node)

    def _arguments(self, node: ast.Call) -> None:
        for arg in node.args:
            self.visit(arg)
        for keyword in node.keywords:
            if keyword.arg in _TEXT_KEYWORDS:
                self._text([keyword.value])
            elif keyword.arg in _CUDA_KEYWORDS:
                self._keyword(keyword)
            elif keyword.arg in _SCHEDULER_KEYWORDS and not (
                    isinstance(keyword.value, ast.Constant) and keyword.value.value in (None, False, 0)):
                self.add(keyword.value, "scheduler", f"{keyword.arg}=")
            self.visit(keyword.value)

    def _keyword(self, keyword: ast.keyword) -> None:
        shape = _CUDA_KEYWORDS[keyword.arg or ""]
        value = keyword.value
        if shape is None:
            if not (isinstance(value, ast.Constant) and value.value in (None, False, 0)):
                self.add(value, "keyword", f"{keyword.arg}=")
            return
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and shape.fullmatch(value.value):
            if value.value != "auto":
                self.add(value, "keyword", f'{keyword.arg}="{value.value}"')
            self._skip.add(id(value))

    def _text(self, values: list[ast.expr]) -> None:
        for value in values:
            for node in ast.walk(value):
                if isinstance(node, ast.Constant):
                    self._skip.add(id(node))

    def visit_Assign(self, node: ast.Assign) -> None:
        """`cfg.trainer.accelerator = "gpu"`, `cfg["accelerator"] = "cuda"`: a framework switch set
        through a config object."""
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in node.targets:
                name = target.attr if isinstance(target, ast.Attribute) else \
                    target.id if isinstance(target, ast.Name) else \
                    target.slice.value if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                    else None
                if not isinstance(name, str):
                    continue
                shape = _CUDA_KEYWORDS.get(name)
                text = str(value.value)
                if shape is not None and shape.fullmatch(text) and text != "auto":
                    self.add(value, "keyword", f'{name} = "{text}"')
                    self._skip.add(id(value))
        self.generic_visit(node)

    # -- strings ---------------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> None:
        if id(node) in self._skip or not isinstance(node.value, str):
            return
        kind = _string_kind(node.value)
        if kind:
            self.add(node, "string", f"{kind} {node.value!r}")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        first = node.values[0] if node.values else None
        if (id(node) not in self._skip and isinstance(first, ast.Constant) and isinstance(first.value, str)
                and first.value in ("cuda", "cuda:") and id(first) not in self._skip):
            self.add(node, "string", f'device string f"{first.value}..."')
            self._skip.add(id(first))
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)


# every site's line spells one of these (an import of a CUDA-only library spells its name)
_SITE_TEXT = re.compile(r"cuda|CUDA|Cuda|cudnn|CUDNN|nccl|NCCL|CUBLAS|Tensorrt|gpus|accelerator|import")


def cuda_sites(tree: ast.Module, facts: FileFacts | None = None, text: str | None = None) -> list[Site]:
    """Every CUDA-specific construct in `tree`, in source order. With the source `text`, only
    statements on lines that can hold a site are visited."""
    lines = None
    if text is not None:
        lines = [number for number, line in enumerate(text.splitlines(), 1) if _SITE_TEXT.search(line)]
        if not lines:
            return []
    scanner = _Scanner(facts or FileFacts.from_tree(tree), lines)
    scanner.visit(tree)
    return sorted(set(scanner.sites), key=lambda s: (s.line, s.col, s.construct))


def statement_spans(tree: ast.Module) -> Iterator[tuple[int, int]]:
    """(first, last) line of every simple statement and of every compound statement's header."""
    for node in iter_statements(tree.body):  # statements only: expressions are not walked
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            # a `case` clause has no position of its own: its header starts at its pattern
            first = node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno
            yield first, max(first, body[0].lineno - 1)
        else:
            yield node.lineno, node.end_lineno or node.lineno

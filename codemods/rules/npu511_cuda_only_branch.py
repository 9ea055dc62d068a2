"""NPU511: the cuda-only-branch rule."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import libcst as cst

from codemods.analyses.capability import capability_break
from codemods.analyses.constantflow import kept_device_bindings
from codemods.analyses.cudaonly import (
    CUDA_ONLY_MODULES,
    PROJECT_OPTION,
    CudaOnlyNames,
    cuda_only_library,
    cuda_only_names,
    import_reason,
)
from codemods.analyses.devices import device_positions
from codemods.api.cases import Invalid, Valid
from codemods.api.positions import node_positions
from codemods.api.rule import Fix, LineSpan, Rule
from codemods.families.lightning import CUDA_ACCELERATORS, accelerator_variables
from codemods.model.astnodes import ast_dotted_parts, iter_statements
from codemods.data import catalogue
from codemods.families.options import literal_text
from codemods.model.cstnodes import code_of, find_all, string_value
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Diagnostic, Edit, Severity

_CUDA_LITERAL = re.compile(r"cuda(:\d*)?")
# the file's own CUDA-only code, without the project's modules: one object, so the per-file model
# keeps one answer for it
_NO_PROJECT: Mapping[str, Mapping[str, str]] = MappingProxyType({})


_NPU_LITERAL = re.compile(r"npu(:\d*)?")
# the libraries' own availability tests (transformers.utils, accelerate.utils), also re-exported by a
# project (LLaMA-Factory: `elif is_torch_npu_available(): ... elif is_torch_cuda_available(): ...`):
# names that specific are known by their last part wherever they are imported from
_CUDA_AVAILABLE = frozenset({"is_torch_cuda_available", "is_cuda_available"})
_NPU_AVAILABLE = frozenset({"is_torch_npu_available", "is_npu_available"})


def _last(qualified: str | None) -> str:
    return (qualified or "").rsplit(".", 1)[-1]


# a message that limits a feature to CUDA: "only enabled when using CUDA-devices", "CUDA-only"
_CUDA_ONLY_WORDS = re.compile(r"\bonly\b[^.\n]*\bCUDA\b|\bCUDA[- ]only\b")
_TENSORRT = "TensorrtExecutionProvider"
_CAPABILITY = frozenset({"torch.cuda.get_device_capability"})
# torch.library calls that register an implementation for a device type
_REGISTRATIONS = frozenset({"torch.library.custom_op", "torch.library.register_kernel", "torch.library.impl"})
_REGISTRATION_NAMES = frozenset(_last(name) for name in _REGISTRATIONS)


def _predicate_around(tree: ast.Module, line: int) -> str | None:
    """The name of the function whose body is one `return` (after an optional docstring) on
    `line`: a predicate such as a checker. None elsewhere."""
    for scope in _scopes_around(tree, line):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        body = scope.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].lineno <= line <= (body[0].end_lineno or line):
            return scope.name
        return None
    return None


def _and_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` (nested to the left by the parser) as [a, b, c]."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        return _and_operands(node.left) + _and_operands(node.right)
    return [node]


def _scopes_around(tree: ast.Module, line: int) -> list[ast.stmt]:
    """Functions and classes whose lines hold `line`, innermost first."""
    around = [s for s in iter_statements(tree.body)
              if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              and s.lineno <= line <= (s.end_lineno or s.lineno)]
    return sorted(around, key=lambda s: s.lineno, reverse=True)



class _IfBlocks:
    """The `if` statements of each statement list of the file (bodies, `else` and `finally`
    blocks), found by line; whether one tests for the NPU is read when first asked."""

    def __init__(self, model: FileModel) -> None:
        self.facts = model.facts
        self.at: dict[int, ast.If] = {}  # line -> the `if` on it
        self.beside: dict[int, list[ast.If]] = {}  # line of an `if` -> the `if`s of its block
        self._npu: dict[int, bool] = {}
        blocks: dict[int, list[ast.If]] = {}  # id of a statement list -> its `if`s
        holder: dict[int, int] = {}  # id of a statement -> id of the list that holds it
        for node in model.of_type(ast.If):
            assert isinstance(node, ast.If)
            if id(node) not in holder:  # the first `if` of its parent: index the parent's lists
                parent = model.parents.get(id(node), model.tree)
                for name in ("body", "orelse", "finalbody"):
                    statements = getattr(parent, name, None) or []
                    holder.update(dict.fromkeys(map(id, statements), id(statements)))
            block = blocks.setdefault(holder[id(node)], [])
            block.append(node)
            self.at[node.lineno] = node
            self.beside[node.lineno] = block

    def npu_sibling(self, line: int) -> bool:
        """Whether another `if` of the block of the `if` on `line` tests for the NPU."""
        this = self.at.get(line)
        return any(other is not this and self._tests_npu(other) for other in self.beside.get(line, ()))

    def _tests_npu(self, node: ast.If) -> bool:
        if id(node) not in self._npu:
            self._npu[id(node)] = _ast_npu_test(node.test, self.facts)
        return self._npu[id(node)]


def _ifs_by_line(model: FileModel) -> dict[int, ast.If]:
    """Line -> the first `if` on it in walk order (an `if` of the file found by a piece's line)."""
    found: dict[int, ast.If] = {}
    for node in model.of_type(ast.If):
        assert isinstance(node, ast.If)
        found.setdefault(node.lineno, node)
    return found


def _assigns_is_cuda(model: FileModel) -> bool:
    """Whether the file assigns an `is_cuda` attribute itself (`self.is_cuda = ...`)."""
    return any(isinstance(node, ast.Attribute) and node.attr == "is_cuda" and isinstance(node.ctx, ast.Store)
               for node in model.of_type(ast.Attribute))


def _reaches_cuda_only(model: FileModel, project: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the file imports CUDA-only code anywhere, or has names that lead to it."""
    names = model.derived(cuda_only_names, project)
    return bool(names) or any(
        isinstance(stmt, (ast.Import, ast.ImportFrom)) and names.reason_in(stmt, model.path, project)
        for stmt in iter_statements(model.tree.body))


# the names whose call `_cuda_guard` takes for a CUDA test (by their last part, or the alias's)
_GUARD_NAMES = frozenset({"is_available"}) | _CUDA_AVAILABLE


def _guard_marks(model: FileModel) -> list[LineSpan]:
    """The lines of what `_cuda_guard` looks for (a "cuda" string, `.is_cuda`, `.CUDA`, an
    availability call) where the rule reads it: an `if` test, a `return` value, an `and`, the
    arguments of a registration. Every node the rule acts on holds one (`target_lines`)."""
    facts, parents = model.facts, model.parents
    names = _GUARD_NAMES | {local for local, target in facts.aliases.items() if _last(target) in _GUARD_NAMES}
    marks: list[ast.expr] = [node for node in model.of_type(ast.Constant) if isinstance(node, ast.Constant)
             and isinstance(node.value, str) and _CUDA_LITERAL.fullmatch(node.value)]
    marks += [node for node in model.of_type(ast.Attribute) if isinstance(node, ast.Attribute)
              and (node.attr in ("is_cuda", "CUDA") or node.attr in _GUARD_NAMES)]
    marks += [node for node in model.of_type(ast.Name) if isinstance(node, ast.Name) and node.id in names]
    return [(node.lineno, node.end_lineno or node.lineno) for node in marks if _read_as_guard(node, parents, facts)]


def _read_as_guard(node: ast.AST, parents: Mapping[int, ast.AST], facts: Any) -> bool:
    """Whether a node lies in an `if` test, a `return` value, an `and` or a registration call
    (its statement is the last place to look)."""
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.If):
            return child is parent.test
        if isinstance(parent, ast.Return) or (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And)) \
                or (isinstance(parent, ast.Call) and _may_register(parent.func, facts)):
            return True
        if isinstance(parent, ast.stmt):
            return False
        child, parent = parent, parents.get(id(parent))
    return False


def _may_register(func: ast.expr, facts: Any) -> bool:
    """Whether a callee may be one of `_REGISTRATIONS` (by its last part, or its alias's)."""
    if isinstance(func, ast.Attribute):
        return func.attr in _REGISTRATION_NAMES
    return isinstance(func, ast.Name) and (func.id in _REGISTRATION_NAMES
                                           or _last(facts.aliases.get(func.id)) in _REGISTRATION_NAMES)


def _ast_npu_test(test: ast.expr, facts: Any) -> bool:
    """`_npu_test` on the `ast`: an `"npu"` literal, `x.is_npu`, an enum's `.NPU`, `torch.npu.*`."""
    for node in ast.walk(test):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NPU_LITERAL.fullmatch(node.value):
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("is_npu", "NPU"):
            return True
        if isinstance(node, (ast.Attribute, ast.Name)) and (parts := ast_dotted_parts(node)):
            qualified = facts.qualify(parts) or ".".join(parts)
            if qualified.startswith(("torch.npu.", "torch_npu.")) or _last(qualified) in _NPU_AVAILABLE:
                return True
    return False


class CudaOnlyBranch(Rule):
    """## What it does

    A CUDA guard (`if device.type == "cuda":`, `if torch.cuda.is_available():`, `if x.is_cuda:`) around a CUDA-only library keeps its CUDA test and is reported.

    ## Why

    Rewriting such a guard to the NPU sends the NPU into code that only runs on CUDA (TensorRT, Triton, bitsandbytes, xFormers, flash-attn, apex, CuPy, NVML, Transformer Engine, a Hugging Face Hub flash-attention kernel loaded with `kernels` (nanochat's FA3 loader, behind `if not torch.cuda.is_available(): return None`), ONNX Runtime's TensorRT provider, Lightning's CUDA accelerator: `accelerator = "cuda"` where the file passes `accelerator=accelerator` to Trainer/Fabric), used in the branch, directly or through the project's own code (a function or class of the file that reaches such a library, such as a `torch.autograd.Function` whose `forward` calls mmcv's compiled ops, `ext_module = ext_loader.load_ext('_ext', [...])`, in mmcv and the projects that vendor it; or a module of the project that imports one when it is imported), or by the function or class around it with what the file itself imports and defines, leaving out the `if` blocks that do not hold the guard (an optional `if args.use_bnb_linear: import bitsandbytes` elsewhere in open_clip's `main()` is no path the guard selects) (a `main()` that reaches timm, whose `fast_norm` tries apex, does not make every CUDA guard in it a CUDA-only path) (`if x.is_cuda: return dtw_cuda(x)`, where `dtw_cuda` imports `.triton_ops`, which imports `triton`; the modules are indexed once per run, over the whole configured project). The guard's rewrite is undone with the edits that described it; the NPU skips the branch as any machine without CUDA would. Never half-migrated. The same holds for `torch.cuda.is_available() and <reads torch.cuda.get_device_capability()>`: the NPU has no compute capability (`torch.npu.get_device_capability()` returns None), so the rewritten test would raise TypeError where it used to be False; it stays on CUDA. So does a predicate function (`def checker(x): return x.device.type == "cuda"`, one `return` of a test) in a module that imports CUDA-only code at module level: there it selects that code (litgpt's unsloth executor registers such checkers in front of its Triton kernels). So does `has_apex and torch.cuda.is_available()`, where `has_apex = True` sits in the module-level `try` that imports the CUDA-only library (ConvNeXt's fused optimizers): the test asks for that library and CUDA together. So does an early return whose message limits a feature to CUDA (FastChat's `if device != "cuda": warnings.warn("CPU-offloading is only enabled when using CUDA-devices"); return False`): the authors' fallback is what the NPU should get, as any machine without CUDA did; a gate that raises (`raise SystemExit("this script only runs on CUDA")`) stops the whole program and is migrated.

    A CUDA arm of an `if`/`elif` chain that also has an NPU arm (`elif device.startswith("npu:")`, `elif torch.npu.is_available()`, transformers' `is_torch_npu_available()`, an enum's `DeviceType.NPU`), or an `if` beside another `if` of the same block that tests for the NPU, is kept whole, test and body: the code already dispatches the NPU to its own arm, and turning the CUDA arm to the NPU too would shadow that arm or send the NPU where the code did not (open_clip's `if torch.cuda.is_available(): model.cuda()` / `elif device == "npu" ...: model.npu()` would move a model meant to stay on the CPU). What other rules would have rewritten in its body is reported at its place.

    ## Example

    ```python
    import torch
    if torch.cuda.is_available():      # kept as written, reported
        import xformers.ops
        out = xformers.ops.memory_efficient_attention(q, k, v)
    ```

    ## Fix safety

    No fix: porting the branch is a design decision.
    Suppress with `# npu-migrate: ignore[NPU511]`.

    ## Targets

    - **npu**: reports it with the route (no fix)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU511"
    prefilter_in_code = True
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-only-branch"
    summary = "A CUDA guard around a CUDA-only library stays a CUDA guard (never half-migrated) and is reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    # the guards it keeps (`torch.cuda.is_available()`, `x.is_cuda`, a "cuda" device string); what
    # they select may be in another file (the project's CUDA-only modules), so no library name here
    prefilter = r"""is_available\(|_cuda_available\(|\.is_cuda\b|\.CUDA\b|['"]cuda"""
    project_facts = (CUDA_ONLY_MODULES,)

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._uses: dict[tuple[int, int], str | None] = {}
        self._names: CudaOnlyNames | None = None
        self._accelerators: frozenset[str] | None = None
        self._kept: dict[str, int] | None = None

    def target_lines(self) -> list[LineSpan]:
        return self.context.model.derived(_guard_marks)

    def visit_If(self, node: cst.If) -> None:
        chains = self.tree.nodes("chained")  # the `elif` arms already seen as part of a chain
        if node in chains:
            return
        arms = [node]
        while isinstance(arms[-1].orelse, cst.If):
            arms.append(arms[-1].orelse)
        chains.update(arms)
        if any(self._npu_test(arm.test) for arm in arms):
            self.tree.nodes("beside_npu").update(arms)

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> Any:
        if not self._cuda_guard(original_node.test):
            return updated_node
        runner = self.runner
        assert runner is not None
        if runner.suppressed(self.code, original_node):
            return updated_node  # `ignore[NPU511]`: the other rules' rewrites and their edits stand
        if (original_node in self.tree.nodes("beside_npu") or self._npu_sibling(original_node)) \
                and not self._npu_test(original_node.test) and not self._reads_own_is_cuda(original_node.test):
            return self._keep_cuda_arm(original_node, updated_node)
        if updated_node.test.deep_equals(original_node.test):
            return updated_node
        library = self._cuda_only_use(original_node.body) or self._enclosing_use(original_node) \
            or self._cuda_only_refusal(original_node)
        if library is None:
            capability = self._capability_break(original_node)
            if capability is None:
                return updated_node
            self._forget_edits_in(original_node.test)
            self.report(original_node, f"this CUDA branch reads the CUDA compute capability ({capability}), which "
                                       "the NPU lacks (`torch.npu.get_device_capability()` returns None: the NPU "
                                       "would raise TypeError there): the guard stays on CUDA (the NPU takes the "
                                       "other path, as a machine without CUDA did); gate the feature on what it "
                                       "needs (`torch.npu.is_bf16_supported()`, ...) by hand")
            return updated_node.with_changes(test=original_node.test)
        self._forget_edits_in(original_node.test)
        self.report(original_node, f"this CUDA branch uses {library}, which runs only on CUDA: the guard stays "
                                   "on CUDA (so the NPU skips the branch); port the branch by hand to give the "
                                   "NPU the same feature")
        return updated_node.with_changes(test=original_node.test)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        """`@torch.library.custom_op("quack::gemm", device_types="cuda")` (and `register_kernel`,
        `impl`): the kernel registered for CUDA tensors. In a file that reaches CUDA-only code it is
        that code (QuACK's CuTe DSL GEMMs): registered for the NPU it would run there. It stays a
        CUDA registration and is reported; the NPU needs an implementation of its own."""
        if self.resolve(original_node.func) not in _REGISTRATIONS:
            return updated_node
        cuda = [a for a in original_node.args if (a.keyword is None or a.keyword.value in ("device_types", "types"))
                and any(_CUDA_LITERAL.fullmatch(string_value(s) or "")
                        for s in find_all(a.value, cst.SimpleString))]
        if not cuda:
            return updated_node
        names = self._cuda_only_names()
        why = next(iter(names.names.values()), None) or next(iter(names.functions.values()), None)
        if why is None:
            self.report(cuda[0], "a kernel registered for CUDA devices only: its implementation here is the file's own "
                                 "code; if that is plain torch ops, register it for \"npu\" as well")
        else:
            self.report(cuda[0], f"a kernel registered for CUDA devices in a module that uses {why}, which runs only "
                                 "on CUDA: the registration stays CUDA's (the NPU would run that code otherwise); "
                                 "register an NPU implementation of the op (device_types=\"npu\") by hand")
        return updated_node

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> Any:
        """`def checker(x): return x.device.type == "cuda"` in a module that imports CUDA-only code
        at module level (litgpt's unsloth executor registers such checkers in front of its Triton
        kernels): a predicate asking "is this on CUDA?" there selects that code. Rewritten, it would
        send the NPU into it; it stays on CUDA."""
        test = original_node.value
        if not isinstance(test, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) \
                or updated_node.deep_equals(original_node) or not self._cuda_guard(test):
            return updated_node
        names = self._cuda_only_names().names
        module = self.context.module
        if not names or module is None:
            return updated_node
        line = node_positions(module, [original_node])[id(original_node)][0] + self.context.line_offset
        function = _predicate_around(self.context.facts.tree, line)
        if function is None:
            return updated_node
        self._forget_edits_in(test)
        self.report(test, f"`{function}()` tests for CUDA in a module that imports {next(iter(names.values()))}, "
                          "which runs only on CUDA: the test stays on CUDA (False on the NPU, so the NPU is not "
                          "handed that code); port the CUDA path by hand, then test for the NPU")
        return updated_node.with_changes(value=test)

    def leave_BooleanOperation(self, original_node: cst.BooleanOperation,
                               updated_node: cst.BooleanOperation) -> Any:
        """`torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)`: the part
        after the guard reads a CUDA compute capability, which the NPU lacks
        (`torch.npu.get_device_capability()` returns None, NPU180). Rewritten, the guard would
        send the NPU into a TypeError where the test used to be False; it stays on CUDA."""
        if not isinstance(original_node.operator, cst.And) or updated_node.deep_equals(original_node):
            return updated_node
        operands = _and_operands(original_node)
        runs = self._cuda_only_operand(operands)
        if runs is not None:
            # StyleGAN's `impl == 'cuda' and x.device.type == 'cuda' and _init()`: the test itself
            # builds the CUDA plugin; on the NPU it must stay False, as on a CPU
            self._forget_edits_in(original_node)
            self.report(original_node, f"this CUDA test also runs {runs}, which runs only on CUDA: it stays on CUDA "
                                       "(False on the NPU, which takes the other path, as a machine without CUDA "
                                       "did); port that code by hand to give the NPU the same feature")
            return original_node
        guard = next((i for i, o in enumerate(operands)
                      if isinstance(o, cst.Call) and self.resolve(o.func) == "torch.cuda.is_available"), None)
        if guard is None:
            return updated_node
        flags = self._cuda_only_names().flags
        flag = next((o.value for o in operands if isinstance(o, cst.Name) and o.value in flags), None)
        if flag is not None:
            # `has_apex and torch.cuda.is_available()` (ConvNeXt's fused optimizers): the test asks
            # for the CUDA-only library and CUDA together; the NPU form would be half a migration
            self._forget_edits_in(original_node)
            self.report(original_node, f"this test asks for `{flag}` (True only where {flags[flag]} imports, "
                                       "which runs only on CUDA) together with CUDA: it stays on CUDA (False on "
                                       "the NPU, as before); port the code it guards by hand")
            return original_node
        if not any(isinstance(c, cst.Call) and self.resolve(c.func) in _CAPABILITY
                   for o in operands[guard + 1:] for c in find_all(o, cst.Call)):
            return updated_node
        self._forget_edits_in(original_node)
        self.report(original_node, "this CUDA test reads the CUDA compute capability, which the NPU lacks "
                                   "(`torch.npu.get_device_capability()` returns None: the NPU form would raise "
                                   "TypeError): it stays on CUDA (False on the NPU, as before); gate the feature on "
                                   "what it needs (`torch.npu.is_bf16_supported()`, ...) by hand")
        return original_node

    def _cuda_only_operand(self, operands: list[cst.BaseExpression]) -> str | None:
        """What CUDA-only code an operand of a conjunction that also tests for CUDA runs (a call
        of the file's own CUDA-only function), or None."""
        guards = [o for o in operands if self._cuda_guard(o)]
        if not guards:
            return None
        return next((why for o in operands if o not in guards and (why := self._cuda_only_use(o))), None)

    def _cuda_guard(self, test: cst.BaseExpression) -> bool:
        for node in find_all(test, (cst.SimpleString, cst.Call, cst.Attribute)):
            if isinstance(node, cst.SimpleString) and _CUDA_LITERAL.fullmatch(string_value(node) or ""):
                return True
            if isinstance(node, cst.Call) and (self.resolve(node.func) == "torch.cuda.is_available"
                                               or _last(self._spelled(node.func)) in _CUDA_AVAILABLE):
                return True
            if isinstance(node, cst.Attribute) and node.attr.value in ("is_cuda", "CUDA"):
                return True  # `x.is_cuda`, an enum's member (`device_type == DeviceType.CUDA`)
        return False

    def _npu_test(self, test: cst.BaseExpression) -> bool:
        """Whether a test, as written, asks for the NPU (`"npu"`, `.startswith("npu:")`,
        `torch.npu.is_available()`, `x.is_npu`)."""
        for node in find_all(test, (cst.SimpleString, cst.Attribute, cst.Call)):
            if isinstance(node, cst.SimpleString) and _NPU_LITERAL.fullmatch(string_value(node) or ""):
                return True
            if isinstance(node, cst.Call) and _last(self._spelled(node.func)) in _NPU_AVAILABLE:
                return True
            if isinstance(node, cst.Attribute) and (
                    node.attr.value in ("is_npu", "NPU") or (self.resolve(node) or "").startswith(("torch.npu.", "torch_npu."))):
                return True
        return False

    def _spelled(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a callee, or its dotted spelling when the file cannot qualify it."""
        return self.resolve(node) or code_of(node)

    def _npu_sibling(self, node: cst.If) -> bool:
        """Whether an `if` next to this one in the same block tests for the NPU (LLaMA-Factory's
        `if is_torch_cuda_available(): return torch.cuda.Event ...` then `if is_torch_npu_available():
        return torch.npu.Event ...`): the code dispatches the NPU to its own `if` as an `elif` would.
        Read in the file's `ast` by line, as the engine may hand the two over in different pieces."""
        module = self.context.module
        if module is None:
            return False
        line = node_positions(module, [node])[id(node)][0] + self.context.line_offset
        return self.context.model.derived(_IfBlocks).npu_sibling(line)

    def _reads_own_is_cuda(self, test: cst.BaseExpression) -> bool:
        """Whether the test reads an `is_cuda` attribute the file assigns itself (timm's
        `self.is_cuda = device.type == 'cuda' and ...`): its definition is migrated with the file
        (it then holds whether the device is the NPU), so the arm must be migrated with it."""
        if not any(a.attr.value == "is_cuda" for a in find_all(test, cst.Attribute)):
            return False
        return self.context.model.derived(_assigns_is_cuda)

    def _keep_cuda_arm(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        """The arm of a chain that also has an NPU arm stays as written, test and body: the NPU
        takes its own arm, and turning this one to the NPU too would shadow it (or send the NPU
        where the code did not). What other rules would have rewritten in it is reported."""
        self._forget_edits_in(original_node.test)  # the report below names the guard
        in_body = _node_ids(original_node.body)
        runner = self.runner
        assert runner is not None
        path, code, severity = self.context.path, self.code, self.severity
        runner.revise_recorded(lambda node, make: _as_kept_report(make, path, code, severity)
                               if id(node) in in_body else make)
        self.report(original_node, "this CUDA branch sits beside an NPU branch (an arm of the same if/elif chain, "
                                   "or an `if` next to it): it stays as written (the NPU takes its own branch; rewriting this one too would "
                                   "shadow it or send the NPU where the code did not)")
        return updated_node.with_changes(test=original_node.test, body=original_node.body)

    def _enclosing_use(self, node: cst.If) -> str | None:
        """A CUDA-only library used by a function or class around the guard (its bases and
        imports included): there the guard selects that library's code path. Found in the
        file's `ast`, so it works whichever piece of the file the engine handed over."""
        module = self.context.module
        if module is None or not self._file_reaches_cuda_only():
            return None  # the file imports no CUDA-only code: no scope can use any
        line = node_positions(module, [node])[id(node)][0] + self.context.line_offset
        # the scope around counts with what this file itself imports and defines; through other
        # modules only what the branch calls counts (`_cuda_only_use`): a `main()` that reaches
        # timm, whose fast_norm tries apex, does not make every CUDA guard in it a CUDA-only path
        names = self.context.model.derived(cuda_only_names, _NO_PROJECT)
        for scope in _scopes_around(self.context.facts.tree, line):
            key = (id(scope), line)
            if key not in self._uses:
                self._uses[key] = names.reason_in(scope, self.context.path, {}, around_line=line)
            if self._uses[key] is not None:
                return self._uses[key]
        return None

    def _capability_break(self, node: cst.If) -> str | None:
        """Where the branch uses a compute capability in a way None breaks (nanochat's
        `capability = torch.cuda.get_device_capability()` then `if capability >= (8, 0):`), said
        for the report; None if it does not. Read in the file's `ast`, over the `if` block."""
        module = self.context.module
        if module is None or "get_device_capability" not in self.context.source:
            return None
        line = node_positions(module, [node])[id(node)][0] + self.context.line_offset
        block = self.context.model.derived(_ifs_by_line).get(line)
        if block is None:
            return None
        found = capability_break(ast.Module(body=block.body, type_ignores=[]), self.context.facts)
        if found is None and _is_gate(block):
            # `if not torch.cuda.is_available(): raise ...` then `major, minor = get_device_capability()`:
            # the code after the gate is what the CUDA test lets run
            after = _statements_after(self.context.facts.tree, block)
            found = capability_break(ast.Module(body=after, type_ignores=[]), self.context.facts) if after else None
        return f"{found[0]} on line {found[1]}" if found else None

    def _cuda_only_refusal(self, node: cst.If) -> str | None:
        """`if device != "cuda": warnings.warn("CPU-offloading is only enabled when using CUDA-devices");
        return False` (FastChat): an early return whose message limits a feature to CUDA. The
        authors' fallback is what a machine without CUDA gets; turned to the NPU, the NPU would
        skip it and go on into the feature. A gate that raises (`requires CUDA`) stops a whole
        program and is migrated as usual."""
        module = self.context.module
        if module is None or "only" not in self.context.source:
            return None
        line = node_positions(module, [node])[id(node)][0] + self.context.line_offset
        block = self.context.model.derived(_ifs_by_line).get(line)
        if block is None or not _is_gate(block) or not isinstance(block.body[-1], ast.Return):
            return None
        said = next((n.value for s in block.body for n in ast.walk(s) if isinstance(n, ast.Constant)
                     and isinstance(n.value, str) and _CUDA_ONLY_WORDS.search(n.value)), None)
        return f'a feature its authors limit to CUDA ("{said.strip().splitlines()[0]}")' if said else None

    def _project(self) -> Mapping[str, Mapping[str, str]]:
        return self.context.options.get(PROJECT_OPTION) or _NO_PROJECT

    def _cuda_only_names(self) -> CudaOnlyNames:
        """The file's names and functions that lead to CUDA-only code (its `ast`, once per file)."""
        if self._names is None:
            self._names = self.context.model.derived(cuda_only_names, self._project())
        return self._names

    def _file_reaches_cuda_only(self) -> bool:
        return self.context.model.derived(_reaches_cuda_only, self._project())

    def _cuda_only_use(self, body: cst.CSTNode) -> str | None:
        # a name after a dot or before `=` in a call is no reference to the file's own names
        # (`torch.backends.cudnn.benchmark` is not timm's `benchmark()`)
        not_references = {id(a.attr) for a in find_all(body, cst.Attribute)}
        not_references |= {id(a.keyword) for a in find_all(body, cst.Arg) if a.keyword}
        for node in find_all(body, (cst.Name, cst.Attribute, cst.SimpleString, cst.Import, cst.ImportFrom)):
            if id(node) in not_references:
                continue
            if isinstance(node, cst.SimpleString):
                text = string_value(node) or ""
                if text == _TENSORRT:
                    return "ONNX Runtime's TensorRT provider"
                if text.endswith((".cu", ".cuh")):
                    return f"a CUDA plugin built from `{text.rsplit('/', 1)[-1]}`"
                continue
            if isinstance(node, (cst.Import, cst.ImportFrom)):
                why = self._import_reason(node)
                if why:
                    return why
                continue
            if isinstance(node, cst.Name):
                names = self._cuda_only_names()
                if node.value in names.names:
                    return names.names[node.value]
                if node.value in names.functions:
                    return f"`{node.value}`, which uses {names.functions[node.value]}"
            qualified = self.resolve(node)
            library = cuda_only_library(qualified) if qualified else None
            if library:
                return f"`{library}`"
        return self._lightning_cuda_accelerator(body) or self._kept_device_value(body) or _cuda_only_option(body)

    def _kept_device_value(self, body: cst.CSTNode) -> str | None:
        """`device = "cuda"` (module level) whose value no rule rewrites (NPU190/NPU500 report it):
        under an NPU guard the NPU would take the CUDA device the branch still sets."""
        for assign in find_all(body, cst.Assign):
            name = assign.targets[0].target if len(assign.targets) == 1 else None
            if not isinstance(name, cst.Name):
                continue
            if not _CUDA_LITERAL.fullmatch(string_value(assign.value) or ""):
                continue
            if self._kept is None:
                self._kept = self.context.model.derived(kept_device_bindings, device_positions())
            if name.value in self._kept:
                return f"`{name.value} = {string_value(assign.value)!r}`, a CUDA device that stays as written (reported there)"
        return None

    def _lightning_cuda_accelerator(self, body: cst.CSTNode) -> str | None:
        """`accelerator = "cuda"` where the file passes `accelerator=accelerator` to Lightning's
        Trainer/Fabric: the branch selects Lightning's CUDA accelerator, which has no NPU
        counterpart (NPU520), so an NPU guard would send the NPU into it."""
        for assign in find_all(body, cst.Assign):
            if not isinstance(assign.value, cst.SimpleString):
                continue
            if (string_value(assign.value) or "").lower() not in CUDA_ACCELERATORS:
                continue
            if self._accelerators is None:
                self._accelerators = accelerator_variables(self.context.facts)
            for target in assign.targets:
                if isinstance(target.target, cst.Name) and target.target.value in self._accelerators:
                    return f"Lightning's CUDA accelerator (`{target.target.value} = {string_value(assign.value)!r}` " \
                           "is passed as `accelerator=`)"
        return None

    def _import_reason(self, node: cst.Import | cst.ImportFrom) -> str | None:
        """Why an import in the branch brings in CUDA-only code (read with `ast`, which resolves
        relative imports the same way as the project index)."""
        text = cst.Module(body=[cst.SimpleStatementLine(body=[node])]).code
        try:
            statement = ast.parse(text.strip()).body[0]
        except SyntaxError:
            return None
        assert isinstance(statement, (ast.Import, ast.ImportFrom))
        return import_reason(statement, self.context.path, self._project())

    def _forget_edits_in(self, test: cst.BaseExpression) -> None:
        """Drop what other rules recorded about the guard's rewrite, which is undone here."""
        inside = _node_ids(test)
        runner = self.runner
        assert runner is not None
        runner.revise_recorded(lambda node, make: None if id(node) in inside else make)


def _is_gate(block: ast.If) -> bool:
    """`if not <on CUDA>: return/raise ...` (an early exit that lets what follows run on CUDA only)."""
    negated = (isinstance(block.test, ast.UnaryOp) and isinstance(block.test.op, ast.Not)) or any(
        isinstance(op, ast.NotEq) for n in ast.walk(block.test) if isinstance(n, ast.Compare) for op in n.ops)
    return negated and not block.orelse and isinstance(block.body[-1], (ast.Return, ast.Raise))


def _statements_after(tree: ast.Module, block: ast.stmt) -> list[ast.stmt]:
    """The statements after `block` in the body that holds it."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            statements = getattr(node, name, None)
            if isinstance(statements, list) and block in statements:
                return statements[statements.index(block) + 1:]
    return []


def _cuda_only_option(body: cst.CSTNode) -> str | None:
    """An option value of the catalogue in the branch that selects CUDA-only code
    (`TrainingArguments(optim="paged_adamw_8bit")`: a bitsandbytes optimizer)."""
    for arg in find_all(body, cst.Arg):
        if arg.keyword is None:
            continue
        value = literal_text(arg.value)
        entry = catalogue.option_entry(arg.keyword.value, value) if value is not None else None
        if entry is not None and catalogue.status(entry) != "works" and entry.get("library"):
            return f"`{arg.keyword.value}={code_of(arg.value)}` ({entry['library']})"
    return None


def _node_ids(root: cst.CSTNode) -> set[int]:
    inside: set[int] = set()

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            inside.add(id(node))
            return True

    root.visit(Collect())
    return inside


def _as_kept_report(make: Callable[[int, int], Any], path: str, code: str,
                    severity: Severity) -> Callable[[int, int], Any]:
    """An edit in a CUDA arm kept as written, turned into a diagnostic at the same place."""
    def made(line: int, col: int) -> Any:
        item = make(line, col)
        if not isinstance(item, Edit):
            return item
        return Diagnostic(code, f"kept on CUDA in a branch the NPU does not take (the chain has an NPU "
                                f"branch); {item.code} would have rewritten it: {item.message}", path, line, col, severity)
    return made


CASES = [
    Valid(  # a test on a call's attribute next to a CUDA branch (torch/_tensor.py): no NPU test, nothing kept
        """\
            import torch


            def move(x, scheduler):
                if scheduler.current().enabled:
                    x = x + 1
                if x.is_cuda:
                    return x
                return x
            """,
    ),
    Invalid(  # LLaMA-Factory's callbacks.py: an `if` per backend, the NPU one next to the CUDA one
        """\
            import torch
            from ..extras.misc import is_torch_cuda_available, is_torch_npu_available


            def event_factory():
                if is_torch_cuda_available():
                    return torch.cuda.Event, torch.cuda.synchronize
                if is_torch_npu_available():
                    return torch.npu.Event, torch.npu.synchronize
                return None
            """,
        with_rules=("NPU120",),
        lines=(6, 7, 7),
    ),
    Invalid(  # LLaMA-Factory v1's checkpoint.py: an enum of device types
        """\
            import torch
            from ...accelerator.helper import DeviceType, get_current_accelerator


            def rng_state():
                device_type = get_current_accelerator().type
                if device_type == DeviceType.CUDA:
                    return torch.cuda.get_rng_state_all()
                elif device_type == DeviceType.NPU:
                    return torch.npu.get_rng_state_all()
            """,
        with_rules=("NPU120",),
        lines=(7, 8),
    ),
    Invalid(  # LLaMA-Factory's extras/misc.py: transformers' availability tests, an NPU arm first
        """\
            import os
            import torch
            from transformers.utils import is_torch_cuda_available, is_torch_npu_available


            def get_device_count():
                if is_torch_npu_available():
                    return torch.npu.device_count()
                elif is_torch_cuda_available():
                    return torch.cuda.device_count()
                return 0
            """,
        with_rules=("NPU120",),
        lines=(9, 10),
    ),
    Invalid(  # TileLang's GEMM autotune example: the gate lets the capability arithmetic run on CUDA only
        """\
    import torch


    def get_heuristic_config() -> dict:
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available")
        device = torch.cuda.current_device()
        sm_major, sm_minor = torch.cuda.get_device_capability(device)
        return {"block_M": 128 if sm_major * 10 + sm_minor >= 80 else 64}
    """,
        after="""\
    import torch


    def get_heuristic_config() -> dict:
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available")
        device = torch.npu.current_device()
        sm_major, sm_minor = torch.npu.get_device_capability(device)
        return {"block_M": 128 if sm_major * 10 + sm_minor >= 80 else 64}
    """,
        codes=("NPU120", "NPU511"),
        with_rules=("NPU120",),
    ),
    Invalid(  # QuACK's gemm_interface.py: a CuTe DSL GEMM registered as a torch op for CUDA tensors
        """\
    import torch
    import cutlass.cute as cute


    @torch.library.custom_op("quack::gemm_add", mutates_args=(), device_types="cuda")
    def gemm_add(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return run_cute_gemm(A, B)
    """,
        codes=("NPU316", "NPU511"),
        with_rules=("NPU316",),
    ),
    Invalid(  # StyleGAN3's bias_act.py: the guard builds and runs a JIT-compiled CUDA plugin
        """\
    import os
    import torch
    from .. import custom_ops

    _plugin = None


    def _init():
        global _plugin
        if _plugin is None:
            _plugin = custom_ops.get_plugin(module_name='bias_act_plugin', sources=['bias_act.cpp', 'bias_act.cu'],
                                            source_dir=os.path.dirname(__file__))
        return True


    def bias_act(x, b=None, impl='cuda'):
        assert impl in ['ref', 'cuda']
        if impl == 'cuda' and x.device.type == 'cuda' and _init():
            return _bias_act_cuda().apply(x, b)
        return _bias_act_ref(x, b)


    def _bias_act_cuda():
        class BiasActCuda(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, b):
                return _plugin.bias_act(x, b)
        return BiasActCuda
    """,
        codes=("NPU192", "NPU311", "NPU511"),
        with_rules=("NPU104", "NPU191", "NPU192", "NPU311", "NPU500"),
    ),
    Invalid(  # BasicSR's ops/dcn/deform_conv.py: a module-level JIT build from CUDA sources; the
        # `is_cuda` test that refuses other tensors stays, so the NPU gets the authors' refusal
        """\
    import os
    import torch
    from torch.utils.cpp_extension import load

    if os.getenv('BASICSR_JIT') == 'True':
        deform_conv_ext = load('deform_conv', sources=[os.path.join('src', 'deform_conv_cuda_kernel.cu')])


    def deform_conv_forward(input, weight, output):
        if not input.is_cuda:
            raise NotImplementedError
        else:
            deform_conv_ext.deform_conv_forward(input, weight, output)
        return output
    """,
        codes=("NPU311", "NPU511"),
        with_rules=("NPU102", "NPU311"),
    ),
    Invalid(  # BasicSR's setup.py: on a CUDA machine the extension is a CUDAExtension with .cu sources
        """\
    import os
    import torch
    from torch.utils.cpp_extension import CppExtension, CUDAExtension


    def make_ext(name, sources, sources_cuda):
        if torch.cuda.is_available() or os.getenv('FORCE_CUDA', '0') == '1':
            extension = CUDAExtension
            sources += sources_cuda
        else:
            extension = CppExtension
        return extension(name=name, sources=sources)
    """,
        codes=("NPU311", "NPU511"),
        with_rules=("NPU120", "NPU311"),
    ),
    Invalid(  # an early-return gate in front of a bitsandbytes feature: the refusal stays the NPU's
        """\
    import warnings
    import bitsandbytes as bnb


    def enable_paged_offload(model, device):
        if device != "cuda":
            warnings.warn("CPU offloading only works with CUDA")
            return False
        bnb.optim.GlobalOptimManager.get_instance().register_parameters(model.parameters())
        return True
    """,
        codes=("NPU307", "NPU511"),
        with_rules=("NPU104", "NPU307"),
    ),
    Invalid(  # FastChat: an early return whose warning limits the feature to CUDA keeps its test
        """\
    import warnings


    def offloading_allowed(device, cpu_offloading):
        if device != "cuda":
            warnings.warn(
                "CPU-offloading is only enabled when using CUDA-devices\\n"
                "Continuing without cpu-offloading enabled\\n"
            )
            return False
        return cpu_offloading
    """,
        with_rules=("NPU104",),
        lines=(5,),
    ),
    Invalid(  # a gate that raises stops the whole program: migrated with the rest
        """\
    import torch


    def main():
        if not torch.cuda.is_available():
            raise SystemExit("this script only runs on CUDA")
        train()
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401


    def main():
        if not torch.npu.is_available():
            raise SystemExit("this script only runs on CUDA")
        train()
    """,
        codes=("NPU100", "NPU120"),
        with_rules=("NPU100", "NPU120"),
    ),
    Invalid(  # a branch that picks a bitsandbytes optimizer by its option value (the catalogue's)
        """\
    import torch
    from transformers import TrainingArguments
    if torch.cuda.is_available():
        args = TrainingArguments(output_dir="o", optim="paged_adamw_8bit")
    else:
        args = TrainingArguments(output_dir="o", optim="adamw_torch")
    """,
        with_rules=("NPU120",),
    ),
    Invalid(  # nanochat's FA3 loader: the early return is the CUDA guard of a Hub flash-attention kernel
        """\
    import torch


    def _load_flash_attention_3():
        if not torch.cuda.is_available():
            return None
        try:
            from kernels import get_kernel
            return get_kernel("kernels-community/flash-attn3").flash_attn_interface
        except Exception:
            return None
    """,
        with_rules=("NPU120",),
    ),
    Invalid(  # ConvNeXt's optim_factory.py: the library's availability flag and CUDA, asked together
        """\
    import torch
    try:
        from apex.optimizers import FusedAdam
        has_apex = True
    except ImportError:
        has_apex = False


    def create(opt):
        if 'fused' in opt:
            assert has_apex and torch.cuda.is_available(), 'APEX and CUDA required for fused optimizers'
    """,
        with_rules=("NPU120",),
    ),
    Invalid(
        """\
    import torch
    if torch.cuda.is_available():
        import xformers.ops
        out = xformers.ops.memory_efficient_attention(q, k, v)
    """,
        codes=("NPU306", "NPU511"),
        with_rules=("NPU120", "NPU306"),
    ),
    Invalid(  # litgpt api.py: the branch picks Lightning's CUDA accelerator, which the NPU cannot use
        """\
    import torch
    import lightning as L
    if torch.cuda.is_available():
        accelerator = "cuda"
    else:
        accelerator = "cpu"
    fabric = L.Fabric(accelerator=accelerator, devices=1)
    """,
        codes=("NPU511",),
        with_rules=("NPU120",),
    ),
    Invalid(  # the branch sets a device value that stays "cuda" (NPU500 reports it): the NPU keeps the CPU
        """\
    import torch
    if torch.cuda.is_available():
        device = "cuda"
    else:
        device = "cpu"
    open(device + ".txt")
    model.to(device)
    """,
        codes=("NPU500", "NPU511"),
        with_rules=("NPU120", "NPU500"),
    ),
    Invalid(  # litgpt's unsloth executor: the checker puts the Triton kernels in front of CUDA tensors
        """\
    import torch
    import triton
    def swiglu_checker(e, g) -> bool:
        return e.device.type == "cuda" and g.device.type == "cuda"
    """,
        codes=("NPU308", "NPU511"),
        with_rules=("NPU104", "NPU308"),
    ),
    Valid(  # no CUDA-only code around: the predicate is migrated (NPU104's)
        """\
    import torch
    def on_accelerator(x) -> bool:
        return x.device.type == "npu"
    """,
    ),
    Invalid(  # litgpt tests/test_model.py:1483: on the NPU the rewritten test raised TypeError
        """\
    import torch
    SUPPORTS_FLASH_ATTENTION = (
        torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0) and not _IS_WINDOWS
    )
    """,
        codes=("NPU511",),
        with_rules=("NPU120",),
    ),
    # nanochat's compute-dtype probe: the branch compares the capability it keeps in a name; on the
    # NPU it would raise TypeError where the module is imported, so the guard stays on CUDA (the
    # NPU takes the float32 path a machine without CUDA took)
    Invalid(
        """\
    import torch
    def detect_dtype():
        if torch.cuda.is_available():
            capability = torch.cuda.get_device_capability()
            if capability >= (8, 0):
                return torch.bfloat16
        return torch.float32
    """,
        after="""\
    import torch
    def detect_dtype():
        if torch.cuda.is_available():
            capability = torch.npu.get_device_capability()
            if capability >= (8, 0):
                return torch.bfloat16
        return torch.float32
    """,
        codes=("NPU120", "NPU511"),
        with_rules=("NPU120",),
    ),
    Valid(  # the capability is only printed: nothing breaks on None, the guard is the NPU's
        """\
        import torch
        import torch_npu  # noqa: F401
        if torch.npu.is_available():
            capability = torch.npu.get_device_capability()
            print("capability", capability)
    """,
    ),
    Valid(
        """\
    import torch
    if torch.npu.is_available():
        x = x.to("npu")
    """,
    ),
    # suppressed on the guard: the other rules' rewrites stand, with their edits
    Valid(
        """\
    import torch
    def set_device(device):
        if device.startswith('cuda:'):  # npu-migrate: ignore[NPU511]
            torch.npu.set_device(device)
        elif device.startswith('npu:'):
            torch.npu.set_device(device)
    """,
    ),
    # a dispatch that already has an NPU branch: the CUDA branch stays whole (open_clip's
    # distributed.py); turning it to the NPU would shadow the NPU branch
    Invalid(
        """\
    import torch
    def set_device(device):
        if device.startswith('cuda:'):
            torch.cuda.set_device(device)
        elif device.startswith('npu:'):
            torch.npu.set_device(device)
    """,
        with_rules=("NPU120",),
    ),
    # ... but not where the CUDA test reads a flag the file defines itself: its definition is
    # migrated too (timm's loader.py: `self.is_cuda = device.type == 'cuda' and ...`)
    Valid(
        """\
    import torch
    class Loader:
        def __init__(self, device):
            self.is_cuda = device.type == 'npu' and torch.npu.is_available()
            self.is_npu = device.type == 'npu' and torch.npu.is_available()

        def stream(self):
            if self.is_cuda:
                return torch.npu.Stream()
            elif self.is_npu:
                return torch.npu.Stream()
    """,
    ),
    # ... and sends the NPU elsewhere than the code did: on an NPU host with device="cpu" the model
    # stayed on the CPU (open_clip's profiler.py)
    Invalid(
        """\
    import torch
    def place(model, device="cpu"):
        if torch.cuda.is_available():
            model = model.cuda()
        elif device == "npu" and torch.npu.is_available():
            model = model.npu()
        return model
    """,
        with_rules=("NPU101", "NPU120"),
    ),
    # an import under another branch of the function around (open_clip's main.py: `if
    # args.use_bnb_linear: import bitsandbytes`) does not make this guard a CUDA-only path
    Valid(
        """\
    import torch
    def main(args):
        if torch.npu.is_available():
            torch.npu.matmul.allow_hf32 = True
        if args.use_bnb_linear is not None:
            import bitsandbytes as bnb
            layer = bnb.nn.Linear8bitLt
    """,
    ),
    # mmcv's ops: the guard picks the compiled kernels (reached through a Function class) over the
    # PyTorch reference, which the NPU keeps using
    Invalid(
        """\
    import torch
    from torch.autograd import Function
    from ..utils import ext_loader
    ext_module = ext_loader.load_ext('_ext', ['fused_bias_leakyrelu'])


    class FusedBiasLeakyReLUFunction(Function):
        @staticmethod
        def forward(ctx, input, bias):
            return ext_module.fused_bias_leakyrelu(input, bias)


    def fused_bias_leakyrelu(input, bias):
        if not input.is_cuda:
            return bias_leakyrelu_ref(input, bias)
        return FusedBiasLeakyReLUFunction.apply(input, bias)
    """,
        with_rules=("NPU102",),
    ),
]

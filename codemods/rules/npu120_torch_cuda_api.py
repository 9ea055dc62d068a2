"""NPU120: the torch-cuda-api rule."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.portable import generic_name
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.families.torch_cuda_api import PREFILTER, AliasUse, alias_uses, cuda_names
from codemods.model.cstnodes import alias_asname, code_of, dotted_expr, dotted_name, split_import
from npu_migrate.core.diagnostics import Severity

CUDA = "torch.cuda"


def _npu_module(node: cst.BaseExpression | None) -> cst.Attribute:
    """`torch.cuda` (as written in an import) -> `torch.npu`."""
    assert isinstance(node, cst.Attribute)
    return node.with_changes(attr=cst.Name("npu"))


# what a CPU build's torch.cuda.<name>() answers (the generic spellings raise without an accelerator)
CPU_ANSWERS = {"memory_allocated": "0", "max_memory_allocated": "0", "memory_reserved": "0",
               "max_memory_reserved": "0", "empty_cache": "None", "memory_stats": "{}",
               "is_bf16_supported": "False"}


# the hooks that track accelerator guards, which only the portable target reads
_GUARD_HOOKS = frozenset({"If", "IfExp", "BooleanOperation"})


def _tests_accelerator(test: cst.BaseExpression) -> bool:
    """Whether a condition asks for an accelerator (`torch.cuda.is_available()`, a device count)."""
    text = code_of(test)
    return "is_available" in text or "device_count" in text


class TorchCudaApi(Rule):
    """## What it does

    `torch.cuda.<name>` becomes `torch.npu.<name>` for the names torch_npu provides

    ## Why

    torch_npu registers `torch.npu` (`torch_npu.npu`), whose `__all__` holds 142 names, most of them
    the `torch.cuda` API under the same name and signature (device management, streams and events,
    the caching allocator, RNG, AMP helpers, NPU-only configuration). `transfer_to_npu` copies those
    names onto `torch.cuda` at run time; names outside the list keep their CUDA implementation.

    The name table is data: `codemods/data/torch_cuda.json` (`torch_npu_npu_all` is the fact sheet's
    §2.1 list; `entries` the coverage rows). Also rewritten: `torch.cuda.random`,
    `torch.cuda.streams` and `torch.cuda.default_generators`, which exist on `torch_npu.npu`
    outside `__all__`. Left to other rules: `torch.cuda.amp` (NPU130), `memory`, `nvtx`, graphs,
    typed `*Tensor` classes, `comm`, `nccl`, `profiler` (NPU150-NPU177). A name in neither list is
    left alone.

    Aliases are resolved:

    - `th.cuda.X` (`import torch as th`) → `th.npu.X`;
    - `from torch.cuda import X` → `from torch.npu import X`; an import that mixes names torch.npu
      has and names it lacks is split on the same line, so no missing name is ever imported:
      `from torch.cuda import get_arch_list; from torch.npu import synchronize` (the names that stay
      come first, on one line; when one of them carries a comment the import is reported instead);
    - module aliases (`import torch.cuda as tc`, `from torch import cuda`) are repointed at
      `torch.npu` (`import torch.npu as tc`, `from torch import npu as cuda`) when every use of the
      alias in the file is a name of the table. Otherwise the import stays and a warning lists the
      uses that block it.

    `import torch.cuda` (which binds `torch`) stays: it is harmless. `from torch.cuda.random import
    ...` stays too: importing a submodule through the `torch.npu` alias would load it a second time.

    ## Example

    ```python
    # before
    from torch.cuda import synchronize, get_arch_list
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)
        torch.cuda.manual_seed_all(0)
    # after
    from torch.cuda import get_arch_list; from torch.npu import synchronize   # + NPU121 warning
    if torch.npu.is_available():
        torch.npu.set_device(rank)
        torch.npu.manual_seed_all(0)
    ```

    ## Fix safety

    Safe: the same function under the NPU module; `transfer_to_npu` makes the same substitution.
    Some names are newer than some torch_npu releases (the entry notes say which, e.g.
    `ExternalStream` and `get_per_process_memory_fraction` are master-only), and
    `get_device_capability()` returns None on NPU (NPU180 reports comparisons on it).
    Suppress with `# npu-migrate: ignore[NPU120]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `torch.accelerator.<name>` where torch.accelerator has it, seeds → `torch.manual_seed`, else `torch.get_device_module().<name>` (by target-version); an unguarded call that a CPU build answers (`memory_allocated()` 0, `empty_cache()`, `memory_stats()`, `is_bf16_supported()`) becomes `(... if torch.accelerator.is_available() else <that answer>)`, since torch.accelerator raises without an accelerator; imports of torch.cuda are reported
    """

    code = "NPU120"
    prefilter_in_code = True
    name = "torch-cuda-api"
    supported_targets = frozenset({"npu", "portable"})
    summary = "`torch.cuda.<name>` becomes `torch.npu.<name>` for the names torch_npu provides"
    fix = Fix.SAFE
    prefilter = PREFILTER
    needs_torch_npu = True

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.names = cuda_names()
        self._alias_cache: dict[str, AliasUse] = {}

    def alias_use(self, local: str) -> AliasUse:
        if local not in self._alias_cache:
            self._alias_cache[local] = alias_uses(self.context.model, local)
        return self._alias_cache[local]

    # -- `torch.cuda.X` chains outside imports ---------------------------------------------------
    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        name = updated_node.attr.value
        if self.context.in_import or name not in self.names.rewrites:
            return updated_node
        owner = original_node.value
        if not (isinstance(owner, cst.Attribute) and owner.attr.value == "cuda"
                and self.resolve(owner) == CUDA):
            return updated_node  # module aliases (`tc.X`) are handled at their import
        if self.target == "portable":
            return self._portable(original_node, updated_node, name)
        new = self.names.rewrites[name]
        value = updated_node.value
        assert isinstance(value, cst.Attribute)
        self.fixed(original_node, f"`torch.cuda.{name}` → `torch.npu.{new}`")
        return updated_node.with_changes(value=value.with_changes(attr=cst.Name("npu")),
                                         attr=updated_node.attr.with_changes(value=new))

    @classmethod
    def idle_hooks(cls, target: str) -> frozenset[str]:
        return frozenset() if target == "portable" else _GUARD_HOOKS

    # -- portable: calls that CPU torch answers without an accelerator --------------------------
    # torch.cuda.memory_allocated() is 0 and empty_cache() does nothing on a CPU build, while
    # torch.accelerator's raise there: an unguarded call keeps the CPU answer
    def visit_If(self, node: cst.If) -> None:
        self.tree.setdefault("guards", []).append(_tests_accelerator(node.test))

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        self.tree.setdefault("guards", [False]).pop()
        return updated_node

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.tree.setdefault("guards", []).append(_tests_accelerator(node.test))

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        self.tree.setdefault("guards", [False]).pop()
        return updated_node

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self.tree.setdefault("guards", []).append(isinstance(node.operator, cst.And) and _tests_accelerator(node.left))

    def leave_BooleanOperation(self, original_node: cst.BooleanOperation,
                               updated_node: cst.BooleanOperation) -> cst.BaseExpression:
        self.tree.setdefault("guards", [False]).pop()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.target != "portable" or any(self.tree.get("guards", ())):
            return updated_node
        qualified = self.resolve(original_node.func) or ""
        name = qualified.removeprefix(f"{CUDA}.")
        available = generic_name("is_available", self.context.options)
        if name not in CPU_ANSWERS or qualified != f"{CUDA}.{name}" or available is None:
            return updated_node
        self.fixed(original_node, f"`torch.cuda.{name}()` keeps its CPU answer (`{CPU_ANSWERS[name]}`) without an accelerator")
        return cst.IfExp(test=cst.Call(func=cst.parse_expression(available)), body=updated_node,
                         orelse=cst.parse_expression(CPU_ANSWERS[name]),
                         lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def _portable(self, original: cst.Attribute, updated: cst.Attribute, name: str) -> cst.BaseExpression:
        generic = generic_name(name, self.context.options)
        if generic is None:
            self.report(original, f"`torch.cuda.{name}`: no device-generic form in the configured "
                                  "target-version; keep it behind a CUDA check", severity=Severity.WARNING)
            return updated
        self.fixed(original, f"`torch.cuda.{name}` → `{generic}`")
        self.context.require_import("torch")  # the chain may start elsewhere (`th.cuda`, `__import__("torch").cuda`)
        return cst.parse_expression(generic)

    def _portable_import(self, node: cst.CSTNode) -> bool:
        """Under --target portable imports of torch.cuda stay and are reported."""
        if self.target != "portable":
            return False
        self.report(node, "`torch.cuda` imported by name: under --target portable write "
                          "`torch.accelerator.<name>` (or `torch.get_device_module().<name>`) by hand",
                    severity=Severity.WARNING)
        return True

    # -- imports -------------------------------------------------------------------------------
    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        if any(dotted_name(a.name) == CUDA and a.asname for a in original_node.names) \
                and self._portable_import(original_node):
            return updated_node
        names = list(updated_node.names)
        changed = False
        for i, (orig, alias) in enumerate(zip(original_node.names, updated_node.names)):
            if alias.asname is None or dotted_name(alias.name) != CUDA:
                continue  # `import torch.cuda` binds `torch`: nothing to repoint
            local = alias_asname(alias)
            if local and self._alias_ready(original_node, local):
                names[i] = alias.with_changes(name=_npu_module(alias.name))
                self.fixed(orig, f"`import torch.cuda as {local}` → `import torch.npu as {local}`")
                changed = True
        return updated_node.with_changes(names=names) if changed else updated_node

    def leave_ImportFrom(self, original_node: cst.ImportFrom,
                         updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if updated_node.relative or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        module = dotted_name(updated_node.module)
        if module == CUDA or (module == "torch" and any(dotted_name(a.name) == "cuda" for a in updated_node.names)):
            if self._portable_import(original_node):
                return updated_node
        if module != "torch":
            return updated_node
        names = list(updated_node.names)
        changed = False
        for i, alias in enumerate(updated_node.names):
            if dotted_name(alias.name) != "cuda":
                continue
            local = alias_asname(alias) or "cuda"
            if self._alias_ready(original_node, local):
                asname = alias.asname or cst.AsName(name=cst.Name("cuda"))
                names[i] = alias.with_changes(name=cst.Name("npu"), asname=asname)
                self.fixed(original_node, f"`from torch import cuda` → `from torch import npu as {local}`")
                changed = True
        return updated_node.with_changes(names=names) if changed else updated_node

    def _alias_ready(self, node: cst.CSTNode, local: str) -> bool:
        """Repoint a `torch.cuda` module alias only when every use of it is a name we rewrite."""
        if self.context.facts.aliases.get(local) != CUDA:
            return False
        use = self.alias_use(local)
        if not use.attrs:
            return False
        blockers = use.blockers(self.names.rewrites)
        if blockers:
            self.report(node, f"`{local}` (torch.cuda) is also used for {', '.join(blockers)}, "
                              "which torch.npu lacks or other rules own; the alias stays CUDA: "
                              f"write `torch.npu.<name>` for its other uses by hand",
                        severity=Severity.WARNING)
            return False
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        if self.target == "portable":
            return updated_node  # `from torch.cuda import` is reported at the import
        """`from torch.cuda import a, b` -> `from torch.npu import ...`; names torch.npu lacks keep
        a `torch.cuda` import of their own on the same line (never import a missing name)."""
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for orig, stmt in zip(original_node.body, updated_node.body):
            new = self._split_from_cuda(orig, stmt)
            changed |= new is not None
            body.extend(new if new is not None else [stmt])
        if not changed or len(original_node.body) != len(updated_node.body):
            return updated_node
        return updated_node.with_changes(body=body)

    def _split_from_cuda(self, orig: cst.BaseSmallStatement,
                         stmt: cst.BaseSmallStatement) -> list[cst.BaseSmallStatement] | None:
        if not (isinstance(stmt, cst.ImportFrom) and not stmt.relative
                and not isinstance(stmt.names, cst.ImportStar) and dotted_name(stmt.module) == CUDA):
            return None
        mine = [a for a in stmt.names if dotted_name(a.name) in self.names.rewrites]
        rest = [a for a in stmt.names if dotted_name(a.name) not in self.names.rewrites]
        if not mine:
            return None
        if not rest and all(self.names.rewrites[dotted_name(a.name) or ""] == dotted_name(a.name) for a in mine):
            moved = stmt.with_changes(module=_npu_module(stmt.module))
            self.fixed(orig, "`from torch.cuda import ...` → `from torch.npu import ...`")
            return [moved]
        moved_names = ", ".join(dotted_name(a.name) or "" for a in mine)
        split = split_import(stmt, [self._renamed(a) for a in mine], dotted_expr("torch.npu"), rest)
        if split is None:
            self.report(orig, f"`{moved_names}` should come from `torch.npu`, but the other names of "
                              "this import carry comments: split the import by hand",
                        severity=Severity.WARNING)
            return None
        self.fixed(orig, f"`{moved_names}` now imported from `torch.npu`; "
                         "the rest stays in a `torch.cuda` import")
        return list(split)

    def _renamed(self, alias: cst.ImportAlias) -> cst.ImportAlias:
        name = dotted_name(alias.name) or ""
        new = self.names.rewrites[name]
        if new == name:
            return alias
        return alias.with_changes(name=cst.Name(new), asname=alias.asname or cst.AsName(name=cst.Name(name)))


CASES = [
    Invalid(  # CPU torch answers these without CUDA: unguarded, they keep that answer
        """\
import torch
torch.cuda.empty_cache()
print(torch.cuda.memory_allocated())
if torch.cuda.is_available():
    print(torch.cuda.max_memory_allocated())
bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
""",
        after="""\
import torch
(torch.accelerator.empty_cache() if torch.accelerator.is_available() else None)
print((torch.accelerator.memory_allocated() if torch.accelerator.is_available() else 0))
if torch.accelerator.is_available():
    print(torch.accelerator.max_memory_allocated())
bf16 = torch.accelerator.is_available() and torch.get_device_module().is_bf16_supported()
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import torch
if torch.cuda.is_available():
    torch.cuda.set_device(rank)
    torch.cuda.manual_seed_all(0)
    print(torch.cuda.memory_allocated(), torch.cuda.get_device_name())
""",
        after="""\
import torch
if torch.accelerator.is_available():
    torch.accelerator.set_device_index(rank)
    torch.manual_seed(0)
    print(torch.accelerator.memory_allocated(), torch.get_device_module().get_device_name())
""",
        options=(("target", "portable"),),
    ),
    Invalid(  # torch 2.5: no torch.accelerator, so torch.get_device_module() (torch 2.3)
        """\
import torch
torch.cuda.synchronize()
""",
        after="""\
import torch
torch.get_device_module().synchronize()
""",
        options=(("target", "portable"), ("target_version", "2.5")),
    ),
    Invalid(  # torch 2.2: neither API; reported
        """\
import torch
torch.cuda.synchronize()
""",
        options=(("target", "portable"), ("target_version", "2.2")),
    ),
    Invalid(
        """\
from torch.cuda import synchronize
synchronize()
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
import os
import torch
from torch.cuda import synchronize, get_arch_list
if torch.cuda.is_available():
    torch.cuda.set_device(rank)
    torch.cuda.manual_seed_all(0)
""",
        after="""\
import os
import torch
from torch.cuda import get_arch_list; from torch.npu import synchronize
if torch.npu.is_available():
    torch.npu.set_device(rank)
    torch.npu.manual_seed_all(0)
""",
    ),
    Valid(
        """\
import os
import torch
from torch.cuda import get_arch_list; from torch.npu import synchronize
if torch.npu.is_available():
    torch.npu.set_device(rank)
    torch.npu.manual_seed_all(0)
""",
    ),
    Invalid(
        """\
import torch
n = torch.cuda.device_count()  # gpus
""",
        after="""\
import torch
n = torch.npu.device_count()  # gpus
""",
    ),
    Invalid(
        """\
import torch
if torch.cuda.is_available():
    pass
""",
        after="""\
import torch
if torch.npu.is_available():
    pass
""",
    ),
    Invalid(
        """\
import torch as th
th.cuda.manual_seed_all(0)
""",
        after="""\
import torch as th
th.npu.manual_seed_all(0)
""",
    ),
    Invalid(
        """\
import torch
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    pass
""",
        after="""\
import torch
s = torch.npu.Stream()
with torch.npu.stream(s):
    pass
""",
    ),
    Invalid(
        """\
import torch
e = torch.cuda.Event(enable_timing=True)
""",
        after="""\
import torch
e = torch.npu.Event(enable_timing=True)
""",
    ),
    Invalid(
        """\
import torch
with torch.cuda.device(1):
    pass
""",
        after="""\
import torch
with torch.npu.device(1):
    pass
""",
    ),
    Invalid(
        """\
import torch
torch.cuda.random.manual_seed(1)
""",
        after="""\
import torch
torch.npu.random.manual_seed(1)
""",
    ),
    Invalid(
        """\
import torch
g = torch.cuda.default_generators[0]
""",
        after="""\
import torch
g = torch.npu.default_generators[0]
""",
    ),
    Invalid(
        """\
import torch
f = torch.cuda.empty_cache
""",
        after="""\
import torch
f = torch.npu.empty_cache
""",
    ),
    Invalid(
        """\
import torch
x = torch.cuda.FloatStorage
""",
        after="""\
import torch
x = torch.npu.FloatStorage
""",
    ),
    Invalid(
        """\
from torch.cuda import synchronize as sync, Stream
""",
        after="""\
from torch.npu import synchronize as sync, Stream
""",
    ),
    Invalid(
        """\
from torch.cuda import (
    Stream,  # streams
    Event,
)
""",
        after="""\
from torch.npu import (
    Stream,  # streams
    Event,
)
""",
    ),
    Invalid(
        """\
from torch.cuda import nvtx, empty_cache
""",
        after="""\
from torch.cuda import nvtx; from torch.npu import empty_cache
""",
    ),
    Invalid(
        """\
import torch.cuda as tc
tc.synchronize()
n = tc.device_count()
""",
        after="""\
import torch.npu as tc
tc.synchronize()
n = tc.device_count()
""",
    ),
    Invalid(
        """\
from torch import cuda
cuda.synchronize()
""",
        after="""\
from torch import npu as cuda
cuda.synchronize()
""",
    ),
    Invalid(
        """\
from torch import nn, cuda as tc
tc.empty_cache()
""",
        after="""\
from torch import nn, npu as tc
tc.empty_cache()
""",
    ),
    Invalid(
        """\
def f():
    from torch.cuda import current_device
    return current_device()
""",
        after="""\
def f():
    from torch.npu import current_device
    return current_device()
""",
    ),
    Valid(
        """\
import torch
x = t.cuda()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
torch.cuda.nvtx.range_push('a')
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
with torch.cuda.amp.autocast():
    pass
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
m = torch.cuda.memory._snapshot()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
t = torch.cuda.FloatTensor(2)
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
x = torch.cuda.make_graphed_callables(f, (a,))
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch
x = torch.cuda.not_a_real_name()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import torch.cuda
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
import numba.cuda
numba.cuda.synchronize()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
from numba import cuda
cuda.synchronize()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
cuda = load()
cuda.synchronize()
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
# torch.cuda.synchronize()
x = 'torch.cuda.synchronize'
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
def f(torch):
    return 1
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
from torch.cuda import nvtx
""",
        with_rules=('NPU121',),
    ),
    Valid(
        """\
from torch.cuda.random import manual_seed
""",
        with_rules=('NPU121',),
    ),
    Invalid(
        """\
import torch
import pytest
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs cuda')
def test_e():
    pass
""",
        after="""\
import torch
import pytest
@pytest.mark.skipif(not torch.npu.is_available(), reason='needs cuda')
def test_e():
    pass
""",
    ),
    Valid(
        """\
import torch
setattr(torch.cuda, 'x', 1)
""",
        with_rules=('NPU103', 'NPU520', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Invalid(
        """\
from torch import cuda
cuda.synchronize()
cuda.jiterator
""",
        lines=(1,),
        with_rules=('NPU501', 'NPU502', 'NPU503'),
    ),
    Valid(
        """\
import torch
def f(m):
    return m.cuda.OutOfMemoryError, 'torch.cuda.OutOfMemoryError'
""",
        with_rules=('NPU501', 'NPU502', 'NPU503'),
    ),
    Valid(
        """\
import torch
f = getattr(torch.nn, 'Linear')
""",
        with_rules=('NPU501', 'NPU502', 'NPU503'),
    ),
    Invalid(  # Dao-AILab/quack's tests: the module the builtin `__import__` returns is torch, no import needed
        """\
        import pytest

        @pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU")
        def test_kernel():
            count = __import__("torch").cuda.device_count()
        """,
        after="""\
        import pytest

        @pytest.mark.skipif(not __import__("torch").npu.is_available(), reason="needs a GPU")
        def test_kernel():
            count = __import__("torch").npu.device_count()
        """,
    ),
    Invalid(  # portable: the generic name starts at `torch`, so the file gets `import torch`
        """\
        import pytest

        @pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU")
        def test_kernel():
            pass
        """,
        after="""\
        import torch
        import pytest

        @pytest.mark.skipif(not torch.accelerator.is_available(), reason="needs a GPU")
        def test_kernel():
            pass
        """,
        codes=("NPU100", "NPU120"),
        options=(("target", "portable"),),
    ),
    Valid(  # a computed module name, another module, and the call as text stay
        """\
        ok = __import__(name).cuda.is_available()
        jit = __import__("numba").cuda.is_available()
        print('__import__("torch").cuda.is_available()')
        """,
    ),
]

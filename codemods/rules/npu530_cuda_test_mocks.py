"""NPU530: the cuda-test-mocks rule."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from codemods.analyses.portable import generic_name
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, LineSpan, Rule
from codemods.families.torch_cuda_api import cuda_names
from codemods.model.cstnodes import dotted_expr
from codemods.model.filemodel import FileModel
from npu_migrate.core.diagnostics import Severity

_PATCHERS = frozenset({"patch", "setattr", "delattr", "object"})
# Lightning's test markers (`lightning.fabric.utilities.testing._runif_reasons`, litgpt's `_RunIf`)
_SKIP_KEYWORDS = {"min_cuda_gpus": "that many CUDA GPUs are present (Lightning's `num_cuda_devices()`)",
                  "bf16_cuda": "a CUDA GPU supports bfloat16"}


def _patch_lines(model: FileModel) -> list[LineSpan]:
    """The calls a patcher may make of `torch.cuda` (a patcher's name, an argument that is a
    string naming `torch.cuda.` or an attribute chain) and the skip keywords: all the rule acts on."""
    found: list[LineSpan] = []
    for node in model.of_type(ast.Call):
        assert isinstance(node, ast.Call)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        values = [a.value if isinstance(a, ast.Starred) else a for a in node.args] + [k.value for k in node.keywords]
        if name in _PATCHERS and any(isinstance(v, ast.Attribute) or (isinstance(v, ast.Constant)
                                     and isinstance(v.value, str) and "torch.cuda." in v.value) for v in values):
            found.append((node.lineno, node.end_lineno or node.lineno))
    found += [(node.lineno, node.end_lineno or node.lineno) for node in model.of_type(ast.keyword)
              if isinstance(node, ast.keyword) and node.arg in _SKIP_KEYWORDS]
    return found


class CudaTestMocks(Rule):
    """## What it does

    `mock.patch("torch.cuda.X")` (also through a module: `mock.patch("pkg.mod.torch.cuda.X")`), `mock.patch.object(torch.cuda, "X")` and `monkeypatch.setattr(torch.cuda, "X", ...)` move to `torch.npu`.

    ## Why

    After migration the code calls `torch.npu.X`; a test that still patches `torch.cuda.X` patches nothing the code reads. Targets move with NPU120 (names torch.npu has); a target torch.npu lacks is reported. Skip markers are plain calls NPU120 rewrites; their reason text stays. Lightning's `RunIf(min_cuda_gpus=N)` / `bf16_cuda=True` (litgpt's `_RunIf`) count CUDA devices only, so the migrated test would be skipped on every Ascend machine: reported, with the `torch.npu.device_count()` route.

    ## Example

    ```python
    # before
    from unittest import mock
    @mock.patch("torch.cuda.is_available", return_value=True)
    def test_a(m):
        pass
    # after
    from unittest import mock
    @mock.patch("torch.npu.is_available", return_value=True)
    def test_a(m):
        pass
    ```

    ## Fix safety

    Safe: the test doubles the name the migrated code calls.
    Suppress with `# npu-migrate: ignore[NPU530]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the patch target follows the portable rewrite of the code under test: `"torch.cuda.is_available"` becomes `"torch.accelerator.is_available"`, `patch.object(torch.cuda, "current_device")` `patch.object(torch.accelerator, "current_device_index")`; a member the portable code reaches through `torch.get_device_module()` is reported
    """

    code = "NPU530"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-test-mocks"
    summary = "`mock.patch(\"torch.cuda.X\")`, `patch.object(torch.cuda, \"X\")`, `monkeypatch.setattr(torch.cuda, ...)` move to torch.npu"
    fix = Fix.SAFE
    severity = Severity.WARNING
    # a patcher whose first argument names torch.cuda (as a dotted string or an object)
    # a patcher whose first argument names torch.cuda (as a dotted string or an object), or
    # Lightning's CUDA skip keywords
    prefilter = r"cuda(?:\.\w+)*[\"']?\s*,|cuda\.\w+[\"']\s*\)|min_cuda_gpus\s*=|bf16_cuda\s*="

    def target_lines(self) -> list[LineSpan]:
        return self.context.model.derived(_patch_lines)

    def visit_Arg(self, node: cst.Arg) -> None:
        """Lightning's `RunIf(min_cuda_gpus=N)` / `bf16_cuda=True` (`_runif_reasons`) count CUDA
        devices only: the migrated test would be skipped on every Ascend machine, unseen."""
        keyword = node.keyword.value if node.keyword else None
        if keyword not in _SKIP_KEYWORDS or _never_skips(node.value):
            return
        self.report(node, f"`{keyword}=` skips the test unless {_SKIP_KEYWORDS[keyword]}: on an Ascend machine the "
                          "migrated test never runs; skip on the NPU instead, e.g. `pytest.mark.skipif("
                          "torch.npu.device_count() < N, reason=...)`")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        func = original_node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        builtin_setattr = name in ("setattr", "delattr") and isinstance(func, cst.Name)  # not a test double
        if name not in _PATCHERS or not original_node.args or builtin_setattr:
            return updated_node
        first = original_node.args[0].value
        rewrites = cuda_names().rewrites
        if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str):
            target = first.evaluated_value
            # `torch.cuda.X`, or `pkg.mod.torch.cuda.X`: torch as the module under test sees it
            prefix, found, rest = target.partition("torch.cuda.")
            if not found or (prefix and not prefix.endswith(".")) or "torch.cuda." in rest:
                return updated_node
            member = rest.split(".")[0]
            if self.target == "portable":
                return self._portable_string(original_node, updated_node, target)
            if rewrites.get(member) != member:
                self.report(original_node, f"the test patches `{target}`, which torch.npu lacks: patch what the migrated code calls")
                return updated_node
            new = updated_node.args[0].value
            assert isinstance(new, cst.SimpleString)
            self.fixed(original_node, f"patch target `{target}` → `{prefix}torch.npu.{rest}`")
            arg = updated_node.args[0].with_changes(value=new.with_changes(value=new.value.replace(
                f"{prefix}torch.cuda.", f"{prefix}torch.npu.", 1)))
            return updated_node.with_changes(args=[arg, *updated_node.args[1:]])
        if self.resolve(first) != "torch.cuda" or not isinstance(first, cst.Attribute) or len(original_node.args) < 2:
            return updated_node
        member_node = original_node.args[1].value
        value = member_node.evaluated_value if isinstance(member_node, cst.SimpleString) else None
        looked_up = value if isinstance(value, str) else None
        if self.target == "portable":
            return self._portable_object(original_node, updated_node, looked_up)
        if looked_up is None or rewrites.get(looked_up) != looked_up:
            self.report(original_node, "the test patches an attribute of `torch.cuda` that torch.npu may lack: "
                                       "patch what the migrated code calls")
            return updated_node
        new_first = updated_node.args[0].value
        assert isinstance(new_first, cst.Attribute)
        self.fixed(original_node, f"patched object `torch.cuda` → `torch.npu` (`{looked_up}`)")
        arg = updated_node.args[0].with_changes(value=new_first.with_changes(attr=cst.Name("npu")))
        return updated_node.with_changes(args=[arg, *updated_node.args[1:]])


    # -- portable: patch what the portable code calls (torch.accelerator.X, torch.manual_seed) -------
    def _generic(self, member: str | None) -> str | None:
        name = generic_name(member, self.context.options) if member else None
        return name if name is not None and "(" not in name else None  # get_device_module() is a call

    def _portable_string(self, original: cst.Call, updated: cst.Call, target: str) -> Any:
        prefix, _, rest = target.partition("torch.cuda.")
        member, _, tail = rest.partition(".")
        generic = self._generic(member)
        if generic is None:
            self.report(original, f"the test patches `{target}`; under --target portable the code calls "
                                  "`torch.get_device_module()` or nothing generic for it: patch what the migrated code calls")
            return updated
        new_target = prefix + generic + (f".{tail}" if tail else "")
        string = updated.args[0].value
        assert isinstance(string, cst.SimpleString)
        self.fixed(original, f"patch target `{target}` → `{new_target}`")
        arg = updated.args[0].with_changes(value=string.with_changes(value=string.value.replace(target, new_target, 1)))
        return updated.with_changes(args=[arg, *updated.args[1:]])

    def _portable_object(self, original: cst.Call, updated: cst.Call, member: str | None) -> Any:
        generic = self._generic(member)
        if generic is None or member is None:
            self.report(original, "the test patches an attribute of `torch.cuda`; under --target portable patch "
                                  "what the migrated code calls (`torch.accelerator.<name>`)")
            return updated
        owner, _, name = generic.rpartition(".")
        first = updated.args[0].value
        assert isinstance(first, cst.Attribute)
        args = list(updated.args)
        args[0] = args[0].with_changes(value=first.with_changes(attr=cst.Name(owner.split(".")[-1]))
                                       if owner == "torch.accelerator" else dotted_expr(owner))
        member_arg = args[1].value
        assert isinstance(member_arg, cst.SimpleString)
        args[1] = args[1].with_changes(value=member_arg.with_changes(value=f"{member_arg.quote}{name}{member_arg.quote}"))
        self.fixed(original, f"patched `torch.cuda.{member}` → `{generic}`")
        return updated.with_changes(args=args)


def _never_skips(value: cst.BaseExpression) -> bool:
    """`min_cuda_gpus=0`, `bf16_cuda=False` or `=None`: the condition asks for nothing."""
    return (isinstance(value, cst.Integer) and value.value == "0") or (
        isinstance(value, cst.Name) and value.value in ("False", "None"))


CASES = [
    Invalid(
        """\
import torch
from unittest import mock
@mock.patch("torch.cuda.is_available", return_value=True)
@mock.patch("torch.cuda.device_count", return_value=2)
def test_a(m, n):
    pass
def test_b(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    with mock.patch("torch.cuda.get_device_properties"):
        pass
""",
        after="""\
import torch
from unittest import mock
@mock.patch("torch.accelerator.is_available", return_value=True)
@mock.patch("torch.accelerator.device_count", return_value=2)
def test_a(m, n):
    pass
def test_b(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    with mock.patch("torch.cuda.get_device_properties"):
        pass
""",
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
from unittest import mock
@mock.patch("torch.cuda.is_available", return_value=True)
def test_a(m):
    pass
""",
        after="""\
from unittest import mock
@mock.patch("torch.npu.is_available", return_value=True)
def test_a(m):
    pass
""",
    ),
    Invalid(  # patched through the module under test's own `torch` (litgpt's tests/test_utils.py)
        """\
from unittest import mock
def test_devices():
    with mock.patch("litgpt.utils.torch.cuda.device_count", return_value=0):
        pass
""",
        after="""\
from unittest import mock
def test_devices():
    with mock.patch("litgpt.utils.torch.npu.device_count", return_value=0):
        pass
""",
    ),
    Invalid(  # Lightning's RunIf counts CUDA devices: the test would be skipped on the NPU, unseen
        """\
from litgpt.utils import _RunIf
@_RunIf(min_cuda_gpus=2, standalone=True)
def test_fsdp():
    pass
""",
    ),
    Valid(
        """\
from unittest import mock
mock.patch("os.getcwd")
RunIf(min_cuda_gpus=0, bf16_cuda=False)
mock.patch("mypkg.mytorch.cuda.helper")
""",
    ),
    Invalid(
        """\
import torch
from unittest import mock
@mock.patch('torch.cuda.is_available', return_value=True)
def test_a(m):
    pass
""",
        after="""\
import torch
from unittest import mock
@mock.patch('torch.npu.is_available', return_value=True)
def test_a(m):
    pass
""",
    ),
    Invalid(
        """\
import torch
from unittest import mock
def test_b():
    with mock.patch.object(torch.cuda, 'synchronize'):
        pass
""",
        after="""\
import torch
from unittest import mock
def test_b():
    with mock.patch.object(torch.npu, 'synchronize'):
        pass
""",
    ),
    Invalid(
        """\
import torch
def test_c(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
""",
        after="""\
import torch
def test_c(monkeypatch):
    monkeypatch.setattr(torch.npu, 'device_count', lambda: 2)
""",
    ),
    Invalid(
        """\
import torch
def test_d(monkeypatch):
    monkeypatch.setattr('torch.cuda.is_available', lambda: True)
""",
        after="""\
import torch
def test_d(monkeypatch):
    monkeypatch.setattr('torch.npu.is_available', lambda: True)
""",
    ),
]

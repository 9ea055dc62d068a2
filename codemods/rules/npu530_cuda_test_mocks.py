"""NPU530: the cuda-test-mocks rule."""

from __future__ import annotations

from typing import Any
import libcst as cst
from codemods.framework.base import Fix, Rule
from codemods.framework.families.torch_cuda_api import cuda_names
from npu_migrate.core.diagnostics import Severity

from codemods.framework.cases import Invalid, Valid


_PATCHERS = frozenset({"patch", "setattr", "delattr", "object"})


class CudaTestMocks(Rule):
    """## What it does

    `mock.patch("torch.cuda.X")`, `mock.patch.object(torch.cuda, "X")` and `monkeypatch.setattr(torch.cuda, "X", ...)` move to `torch.npu`.

    ## Why

    After migration the code calls `torch.npu.X`; a test that still patches `torch.cuda.X` patches nothing the code reads. Targets move with NPU120 (names torch.npu has); a target torch.npu lacks is reported. Skip markers are plain calls NPU120 rewrites; their reason text stays.

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
    - **portable**: not yet
    """

    code = "NPU530"
    name = "cuda-test-mocks"
    summary = "`mock.patch(\"torch.cuda.X\")`, `patch.object(torch.cuda, \"X\")`, `monkeypatch.setattr(torch.cuda, ...)` move to torch.npu"
    fix = Fix.SAFE
    severity = Severity.WARNING
    # a patcher whose first argument names torch.cuda (as a dotted string or an object)
    prefilter = r"cuda(?:\.\w+)*[\"']?\s*,|cuda\.\w+[\"']\s*\)"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        func = original_node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name not in _PATCHERS or not original_node.args or name in ("setattr", "delattr") and isinstance(func, cst.Name):
            return updated_node  # builtin setattr is not a test double
        first = original_node.args[0].value
        rewrites = cuda_names().rewrites
        if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str):
            target = first.evaluated_value
            if not target.startswith("torch.cuda."):
                return updated_node
            member = target.removeprefix("torch.cuda.").split(".")[0]
            if rewrites.get(member) != member:
                self.report(original_node, f"the test patches `{target}`, which torch.npu lacks: patch what the migrated code calls")
                return updated_node
            new = updated_node.args[0].value
            assert isinstance(new, cst.SimpleString)
            self.fixed(original_node, f"patch target `{target}` → `torch.npu.{target[len('torch.cuda.'):]}`")
            arg = updated_node.args[0].with_changes(value=new.with_changes(value=new.value.replace("torch.cuda.", "torch.npu.", 1)))
            return updated_node.with_changes(args=[arg, *updated_node.args[1:]])
        if self.resolve(first) != "torch.cuda" or not isinstance(first, cst.Attribute) or len(original_node.args) < 2:
            return updated_node
        member_node = original_node.args[1].value
        value = member_node.evaluated_value if isinstance(member_node, cst.SimpleString) else None
        looked_up = value if isinstance(value, str) else None
        if looked_up is None or rewrites.get(looked_up) != looked_up:
            self.report(original_node, "the test patches an attribute of `torch.cuda` that torch.npu may lack: "
                                       "patch what the migrated code calls")
            return updated_node
        new_first = updated_node.args[0].value
        assert isinstance(new_first, cst.Attribute)
        self.fixed(original_node, f"patched object `torch.cuda` → `torch.npu` (`{looked_up}`)")
        arg = updated_node.args[0].with_changes(value=new_first.with_changes(attr=cst.Name("npu")))
        return updated_node.with_changes(args=[arg, *updated_node.args[1:]])


CASES = [
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
    Valid(
        """\
from unittest import mock
mock.patch("os.getcwd")
""",
    ),
]

"""NPU510: the onnxruntime-cann-provider rule."""

from __future__ import annotations

from typing import Any
import libcst as cst
from codemods.framework.base import Fix, Rule
from npu_migrate.core.diagnostics import Severity

from codemods.framework.cases import Invalid, Valid


_PROVIDER = "CUDAExecutionProvider"


_TENSORRT = "TensorrtExecutionProvider"


def _string(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


class OnnxRuntimeCann(Rule):
    """## What it does

    ONNX Runtime's `"CUDAExecutionProvider"` becomes `"CANNExecutionProvider"`; `"TensorrtExecutionProvider"` is reported.

    ## Why

    ONNX Runtime runs on Ascend through its CANN execution provider (onnxruntime-cann builds). Rewriting the provider with the guard that selects it (NPU104) keeps the NPU path working instead of half-migrated. The TensorRT provider has no Ascend counterpart.

    ## Example

    ```python
    # before
    import onnxruntime as ort
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    # after
    import onnxruntime as ort
    providers = ["CANNExecutionProvider", "CPUExecutionProvider"]
    ```

    ## Fix safety

    Safe: the provider options (`device_id`, ...) carry over.
    Suppress with `# npu-migrate: ignore[NPU510]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU510"
    name = "onnxruntime-cann-provider"
    summary = "ONNX Runtime `CUDAExecutionProvider` becomes `CANNExecutionProvider`; the TensorRT provider is reported"
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"ExecutionProvider"

    def _uses_onnxruntime(self) -> bool:
        return any(t == "onnxruntime" or t.startswith("onnxruntime.") for t in self.context.facts.aliases.values())

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> Any:
        value = _string(updated_node)
        if value not in (_PROVIDER, _TENSORRT) or not self._uses_onnxruntime():
            return updated_node
        if value == _TENSORRT:
            self.report(original_node, "ONNX Runtime's TensorRT provider has no Ascend counterpart: drop it "
                                       "(CANNExecutionProvider runs the model on the NPU)")
            return updated_node
        self.fixed(original_node, '"CUDAExecutionProvider" → "CANNExecutionProvider" (ONNX Runtime on Ascend)')
        return updated_node.with_changes(value=updated_node.value.replace(_PROVIDER, "CANNExecutionProvider"))


CASES = [
    Invalid(
        """\
import onnxruntime as ort
providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
""",
        after="""\
import onnxruntime as ort
providers = ["CANNExecutionProvider", "CPUExecutionProvider"]
""",
    ),
    Invalid(
        """\
import onnxruntime as ort
providers = ["TensorrtExecutionProvider"]
""",
        codes=("NPU510",),
    ),
    Valid(
        """\
name = "CUDAExecutionProvider"
""",
    ),
]

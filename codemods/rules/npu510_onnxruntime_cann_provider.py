"""NPU510: the onnxruntime-cann-provider rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.model.cstnodes import string_value
from npu_migrate.core.diagnostics import Severity

_PROVIDER = "CUDAExecutionProvider"
_CANN = "CANNExecutionProvider"


_TENSORRT = "TensorrtExecutionProvider"



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
    - **portable**: a provider list that names `"CUDAExecutionProvider"` gets `"CANNExecutionProvider"` right after it (ONNX Runtime skips, with a warning, the providers its build lacks, so one list serves CUDA, Ascend and CPU builds); the provider string elsewhere is reported
    """

    code = "NPU510"
    supported_targets = frozenset({"npu", "portable"})
    name = "onnxruntime-cann-provider"
    summary = "ONNX Runtime `CUDAExecutionProvider` becomes `CANNExecutionProvider`; the TensorRT provider is reported"
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"ExecutionProvider"

    def _uses_onnxruntime(self) -> bool:
        return any(t == "onnxruntime" or t.startswith("onnxruntime.") for t in self.context.facts.aliases.values())

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> Any:
        value = string_value(updated_node)
        if value not in (_PROVIDER, _TENSORRT) or not self._uses_onnxruntime():
            return updated_node
        if self.target == "portable" and value == _PROVIDER:
            if original_node not in self.tree.nodes("listed"):
                self.report(original_node, '"CUDAExecutionProvider" outside a provider list: under --target portable '
                                           'list "CANNExecutionProvider" beside it by hand (ONNX Runtime skips '
                                           'providers its build lacks)')
            return updated_node
        if value == _TENSORRT:
            self.report(original_node, "ONNX Runtime's TensorRT provider has no Ascend counterpart: drop it "
                                       "(CANNExecutionProvider runs the model on the NPU)")
            return updated_node
        self.fixed(original_node, '"CUDAExecutionProvider" → "CANNExecutionProvider" (ONNX Runtime on Ascend)')
        return updated_node.with_changes(value=updated_node.value.replace(_PROVIDER, "CANNExecutionProvider"))


    # -- portable: a provider list names both, ONNX Runtime uses the one its build has -------------
    def visit_List(self, node: cst.List) -> None:
        self._mark(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._mark(node)

    def _mark(self, node: cst.List | cst.Tuple) -> None:
        if self.target == "portable":
            self.tree.nodes("listed").update(
                e.value for e in node.elements if isinstance(e, cst.Element) and string_value(e.value) == _PROVIDER)

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> Any:
        return self._twin(original_node, updated_node)

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> Any:
        return self._twin(original_node, updated_node)

    def _twin(self, original: cst.List | cst.Tuple, updated: Any) -> Any:
        """`["CUDAExecutionProvider", "CPUExecutionProvider"]` -> `["CUDAExecutionProvider",
        "CANNExecutionProvider", "CPUExecutionProvider"]`: ONNX Runtime skips (with a warning)
        the providers its build lacks, so the list runs on a CUDA, an Ascend or a CPU build."""
        if self.target != "portable" or not self._uses_onnxruntime():
            return updated
        names = [string_value(e.value) for e in updated.elements if isinstance(e, cst.Element)]
        if _PROVIDER not in names or _CANN in names:
            return updated
        elements = []
        for element in updated.elements:
            elements.append(element)
            value = element.value if isinstance(element, cst.Element) else None
            if isinstance(value, cst.SimpleString) and string_value(value) == _PROVIDER:
                twin = value.with_changes(value=value.value.replace(_PROVIDER, _CANN))
                comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                elements[-1] = element.with_changes(comma=comma)
                elements.append(element.with_changes(value=twin))
        self.fixed(original, '"CANNExecutionProvider" listed beside "CUDAExecutionProvider" (ONNX Runtime uses '
                             'the one its build has)')
        return updated.with_changes(elements=elements)


CASES = [
    Invalid(
        """\
import onnxruntime as ort
providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
session = ort.InferenceSession("m.onnx", providers=("CUDAExecutionProvider",))
""",
        after="""\
import onnxruntime as ort
providers = ["CUDAExecutionProvider", "CANNExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
session = ort.InferenceSession("m.onnx", providers=("CUDAExecutionProvider", "CANNExecutionProvider",))
""",
        options=(("target", "portable"),),
    ),
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

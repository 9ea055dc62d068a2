"""NPU510 ONNX Runtime's CUDA provider -> CANN; NPU511 CUDA guards around CUDA-only libraries
stay CUDA guards (never half-migrated)."""

import pytest
import rule_cases

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

ORT = "import onnxruntime as ort\n"
T = "import torch\n"


def with_defaults(src: str):
    outcome = migrate_text(src, "t.py", RuleSet(select_rules(all_rules())))
    assert outcome.error is None, outcome.error
    return outcome


def test_onnxruntime_guard_and_provider_move_together():
    src = (T + ORT + "def session(device):\n    if device.type == 'cuda':\n"
           "        providers = [('CUDAExecutionProvider', {'device_id': 0}), 'CPUExecutionProvider']\n"
           "    else:\n        providers = ['CPUExecutionProvider']\n"
           "    return ort.InferenceSession('m.onnx', providers=providers)\n")
    out = with_defaults(src).new_text
    assert "if device.type == 'npu':" in out
    assert "('CANNExecutionProvider', {'device_id': 0})" in out and "CUDAExecutionProvider" not in out


def test_tensorrt_provider_is_reported_not_rewritten():
    src = ORT + "providers = ['TensorrtExecutionProvider', 'CUDAExecutionProvider']\n"
    outcome = rule_cases.migrate(src, ["NPU510"])
    assert outcome.new_text == ORT + "providers = ['TensorrtExecutionProvider', 'CANNExecutionProvider']\n"
    assert [d.code for d in outcome.diagnostics] == ["NPU510"]


def test_provider_string_without_onnxruntime_is_left_alone():
    src = "name = 'CUDAExecutionProvider'\n"
    assert rule_cases.migrate(src, ["NPU510"]).new_text is None


GUARDED = [
    ("if torch.cuda.is_available():\n    import xformers.ops\n    y = xformers.ops.memory_efficient_attention(q, k, v)\n",
     "xformers"),
    ("if x.device.type == 'cuda':\n    import tensorrt as trt\n    engine = trt.Builder(None)\n", "tensorrt"),
    ("import triton\nif x.is_cuda:\n    kernel = triton.jit(f)\n", "triton"),
    ("import bitsandbytes as bnb\nif device == 'cuda':\n    opt = bnb.optim.Adam8bit(params)\n", "bitsandbytes"),
    # the class around the guard is a bitsandbytes layer: its re-quantisation path is CUDA-only
    (("def make():\n    import bitsandbytes as bnb\n    class Linear(bnb.nn.Linear8bitLt):\n"
      "        def to(self, device):\n            if device.type == 'cuda':\n                self.quantize_(device)\n"
      "            return self\n    return Linear\n"), "bitsandbytes"),
]


@pytest.mark.parametrize("src,library", GUARDED)
def test_cuda_guard_around_cuda_only_library_stays_on_cuda(src, library):
    src = T + src
    outcome = with_defaults(src)
    out = outcome.new_text or src
    guard = next(line for line in src.splitlines() if line.lstrip().startswith("if "))
    assert guard in out.splitlines(), out  # the guard is unchanged
    reports = [d for d in outcome.diagnostics if d.code == "NPU511"]
    assert len(reports) == 1 and library in reports[0].message
    # no edit claims the guard was rewritten
    guard_line = src.splitlines().index(guard) + 1
    assert not [e for e in outcome.edits if e.line == guard_line]


def test_guard_around_portable_code_is_still_migrated():
    src = T + "def f(x):\n    if torch.cuda.is_available():\n        x = x.to('cuda')\n    return x\n"
    outcome = with_defaults(src)
    assert "torch.npu.is_available()" in outcome.new_text and "NPU511" not in {d.code for d in outcome.diagnostics}

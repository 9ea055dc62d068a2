"""Device precision beyond HF32: `cube_math_type`, and float16 accumulation on request."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from npu_migrate import emulation
from npu_migrate.emulation import EmulationError
from npu_migrate.emulation._precision import FP16_BLOCK, fp16_accumulated_matmul, round_to_hf32


def _by_hand(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The same model of a float16 accumulator, one output element at a time in plain Python."""
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            total = torch.tensor(0.0, dtype=torch.float16)
            for k0 in range(0, a.shape[1], FP16_BLOCK):
                block = (a[i, k0:k0 + FP16_BLOCK].double() * b[k0:k0 + FP16_BLOCK, j].double()).sum()
                total = total + block.float().half()
            out[i, j] = total
    return out


def test_the_blocked_accumulator_matches_a_by_hand_model() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(3, 70).half(), torch.randn(70, 2).half()  # 70: a last, partial block
    assert torch.equal(fp16_accumulated_matmul(a, b), _by_hand(a, b))


def test_a_long_sum_loses_what_a_float16_accumulator_loses() -> None:
    # 4096 terms of about 1.0: the accumulator passes 2048, where float16's spacing is 2
    torch.manual_seed(1)
    a = (1 + torch.rand(1, 4096) / 8).half()
    b = torch.ones(4096, 1).half()
    float32_accumulated = (a.float() @ b.float()).half()
    emulated = fp16_accumulated_matmul(a, b)
    exact = a.double() @ b.double()
    assert abs(float(float32_accumulated) - float(exact)) <= 4  # one float16 rounding at the end
    assert abs(float(emulated) - float(exact)) > 4 * abs(float(float32_accumulated) - float(exact)) + 4


def test_activated_fp16_accumulation_changes_float16_matmuls_only() -> None:
    torch.manual_seed(2)
    layer = nn.Linear(2048, 4)
    x = torch.rand(8, 2048)
    exact32 = layer(x)
    x16, layer16 = x.half(), nn.Linear(2048, 4).half()
    layer16.load_state_dict({k: v.half() for k, v in layer.state_dict().items()})
    plain16 = layer16(x16)
    emulation.activate(precision="device", fp16_accumulation=True)
    try:
        assert torch.equal(layer(x), exact32)  # float32 keeps float32 accumulation
        emulated16 = layer16(x16)
        emulated16.float().sum().backward()  # the backward matmuls are float16 ones too
        assert layer16.weight.grad is not None and layer16.weight.grad.dtype == torch.float16
    finally:
        emulation.deactivate()
    assert not torch.equal(emulated16, plain16)
    reference = x.double() @ layer.weight.double().T + layer.bias.double()
    assert (emulated16.double() - reference).abs().max() > (plain16.double() - reference).abs().max()


def test_cube_math_type_selects_hf32_or_float16_inputs() -> None:
    # HF32 and float16 keep the same 10 mantissa bits; float16 also loses float32's range
    torch.manual_seed(3)
    a, b = torch.randn(16, 64) * 1e3, torch.randn(64, 8)
    a[0, 0] = 1e5  # beyond float16's 65504
    exact = a @ b
    emulation.activate(precision="device")
    try:
        assert torch.equal(a @ b, exact)  # KEEP_DTYPE by default
        torch.npu.matmul.cube_math_type = torch.npu.CubeMathType.USE_FP16
        fp16_inputs = a @ b
        torch.npu.matmul.cube_math_type = torch.npu.CubeMathType.USE_HF32
        hf32 = a @ b
    finally:
        emulation.deactivate()
    assert torch.equal(fp16_inputs, a.half().float() @ b.half().float())
    assert torch.isinf(fp16_inputs[0]).all() and torch.isfinite(fp16_inputs[1:]).all()
    assert torch.equal(hf32, round_to_hf32(a) @ round_to_hf32(b))
    assert torch.isfinite(hf32).all() and not torch.equal(hf32, exact)


def test_fp16_accumulation_needs_device_precision() -> None:
    with pytest.raises(EmulationError, match="precision='device'"):
        emulation.activate(fp16_accumulation=True)
    assert not emulation.is_active()


def test_the_verifier_target_side_runs_with_fp16_accumulation_when_asked() -> None:
    from npu_migrate.emulation._state import STATE
    from npu_migrate.verify.script_runner import _setup

    backend = _setup({"side": "target", "device_precision": True, "fp16_accumulation": True})
    try:
        assert "device precision, fp16 accumulation" in backend
        assert STATE.precision is not None and STATE.precision.fp16_accumulation
    finally:
        emulation.deactivate()
    backend = _setup({"side": "target", "fp16_accumulation": True})  # without device precision: no effect
    try:
        assert "exact precision," in backend and STATE.precision is None
    finally:
        emulation.deactivate()


def test_the_cli_refuses_fp16_accumulation_without_device_precision(tmp_path) -> None:
    from click.testing import CliRunner

    from npu_migrate.cli import main

    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "train.py").write_text("print(1)\n")
    result = CliRunner().invoke(main, ["verify", "--original", str(tmp_path / "a"), "--migrated", str(tmp_path / "b"),
                                       "--fp16-accumulation", "--", "train.py"])
    assert result.exit_code == 2 and "--device-precision" in result.output
    assert len(result.output.strip().splitlines()) == 1

"""The op-level comparison in-process: alignment, the noise rule, boundaries, precision loss."""

from __future__ import annotations

import torch

from npu_migrate.emulation._precision import round_to_hf32
from npu_migrate.verify.opcapture import summarise
from npu_migrate.verify.opcompare import compare_records, distance


def _op(seq, name, tensor, site, step=0):
    return {"kind": "op", "name": name, "seq": seq, "step": step, "site": site, "module": None,
            "outputs": [summarise(tensor)]}


def _run(x, w, perturb=None, extra=None):
    """linear -> layer norm -> sum, as ops; `perturb` changes the norm's output."""
    h = x @ w
    events = [_op(0, "aten.mm.default", h, "m.py:1")]
    if extra is not None:
        h = extra(h)
        events.append(_op(1, "aten._to_copy.default", h.to(torch.bfloat16), "m.py:2"))
    y = torch.nn.functional.layer_norm(h, h.shape[-1:])
    if perturb is not None:
        y = perturb(y)
    events.append(_op(2, "aten.native_layer_norm.default", y, "m.py:3"))
    events.append(_op(3, "aten.sum.default", y.sum(), "m.py:4"))
    return events


X, W = torch.randn(64, 128, generator=torch.Generator().manual_seed(0)), torch.randn(128, 64) / 11


def test_hf32_noise_passes_and_faults_beyond_it_fail():
    reference = _run(X, W)
    noise = _run(round_to_hf32(X), round_to_hf32(W))
    assert compare_records(reference, noise, noise).first is None  # the device itself: passes
    scaled = compare_records(reference, _run(X, W, perturb=lambda y: y * 1.0025), noise).first
    assert scaled is not None and scaled.site == "m.py:3" and "tolerance" in scaled.reason
    assert compare_records(reference, reference, None).first is None


def test_a_precision_round_trip_is_flagged_at_its_line_whatever_its_size():
    reference, noise = _run(X, W), _run(round_to_hf32(X), round_to_hf32(W))
    trip = _run(X, W, extra=lambda h: h.bfloat16().float())
    first = compare_records(reference, trip, noise).first
    assert first.site == "m.py:2" and "lowers precision to bfloat16" in first.reason


def test_nonfinite_values_must_sit_at_the_same_places():
    mask = torch.log(torch.tril(torch.ones(8, 8)))
    flipped = torch.log(torch.triu(torch.ones(8, 8)))
    value, reason = distance(_op(0, "aten.log.default", mask, "a:1"), _op(0, "aten.log.default", flipped, "a:1"))
    assert value == float("inf") and "NaN/Inf" in reason


def test_a_seed_change_comes_first():
    seed = {"kind": "seed", "name": "torch.manual_seed", "site": "t.py:3", "step": -1}
    reference = [dict(seed, value="1", seq=0)] + [dict(e, seq=e["seq"] + 1) for e in _run(X, W)]
    migrated = [dict(seed, value="2", seq=0)] + [dict(e, seq=e["seq"] + 1) for e in _run(X, W * 1.1)]
    first = compare_records(reference, migrated, None).first
    assert first.kind == "seed" and first.site == "t.py:3"


def _linear_under_autocast(input_first: bool) -> list[dict]:
    """A bf16 linear as autocast records it: the casts of its input and its weight, then the mm;
    the CPU's C++ autocast casts the weight first, the emulated npu's the input first."""
    generator = torch.Generator().manual_seed(2)
    x, w = torch.randn(8, 128, generator=generator), torch.randn(16, 128, generator=generator)
    casts = [_op(0, "aten._to_copy.default", x.bfloat16(), "lora.py:30"),
             _op(1, "aten._to_copy.default", w.bfloat16(), "lora.py:30")]
    if not input_first:
        casts.reverse()
    out = x.bfloat16() @ w.bfloat16().T
    return [*casts, _op(2, "aten.mm.default", out, "lora.py:30"), _op(3, "aten.sum.default", out.float().sum(), "t.py:9")]


def test_autocast_casts_in_another_order_are_no_precision_loss():
    original = _linear_under_autocast(input_first=False)
    migrated = _linear_under_autocast(input_first=True)
    assert compare_records(original, migrated, original).first is None
    # a cast the original does not run at all still is one
    extra = [*migrated[:3], _op(5, "aten._to_copy.default", X[:8, :4].bfloat16(), "lora.py:31"), migrated[3]]
    first = compare_records(original, extra, original).first
    assert first is not None and first.site == "lora.py:31" and "lowers precision to bfloat16" in first.reason


def _amp_residual(h: torch.Tensor, low: bool) -> list[dict]:
    """A residual add and the RMSNorm's `x.float()` after it: under autocast the add is bfloat16
    and the cast is an op; in the float32 reference there is nothing to cast."""
    events = [_op(0, "aten.add_.Tensor", h.bfloat16() if low else h, "m.py:192")]
    if low:
        events.append(_op(1, "aten._to_copy.default", h.bfloat16().float(), "m.py:60"))
    events.append(_op(2, "aten.sum.default", h.bfloat16().float().sum() if low else h.sum(), "m.py:61"))
    return events


def test_a_widening_cast_the_float32_reference_does_not_run_is_judged_at_its_input():
    h = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    amp_original, float32_reference = _amp_residual(h, low=True), _amp_residual(h, low=False)
    one_ulp_apart = h * (1 + 2 ** -11)  # some bfloat16 roundings an ulp apart (far above float32 floor)
    assert compare_records(amp_original, _amp_residual(one_ulp_apart, low=True), float32_reference).first is None
    wrong = compare_records(amp_original, _amp_residual(h * 1.05, low=True), float32_reference).first
    assert wrong is not None and wrong.site == "m.py:192"


def test_under_amp_the_tolerance_is_the_autocast_runs_distance_from_float32():
    """The noise run of an AMP script computes in bfloat16 where the reference computes in float32:
    that distance, across the dtypes, is the noise each op is judged by (here 2%)."""
    h = torch.randn(8, 64, generator=torch.Generator().manual_seed(3))
    float32_reference = [_op(0, "aten.mul.Tensor", h, "m.py:147")]
    amp_original = [_op(0, "aten.mul.Tensor", (h * 1.02).bfloat16(), "m.py:147")]
    within = [_op(0, "aten.mul.Tensor", (h * 1.035).bfloat16(), "m.py:147")]  # 1.5% from the AMP original
    assert compare_records(amp_original, within, float32_reference).first is None
    beyond = [_op(0, "aten.mul.Tensor", (h * 1.2).bfloat16(), "m.py:147")]
    assert compare_records(amp_original, beyond, float32_reference).first.site == "m.py:147"


def test_a_narrowing_cast_only_autocast_runs_adds_its_rounding_to_its_inputs_noise():
    """RMSNorm's `.type_as(x)` back to bfloat16 under autocast (no op in the float32 reference):
    judged by the noise of the float32 op that made its input, not by the bfloat16 floor alone."""
    h = torch.randn(8, 64, generator=torch.Generator().manual_seed(4))

    def run(scale: float, amp: bool) -> list[dict]:
        events = [_op(0, "aten.mul.Tensor", h * scale, "m.py:60")]
        return events + [_op(1, "aten._to_copy.default", (h * scale).bfloat16(), "m.py:60")] if amp else events

    assert compare_records(run(1.05, True), run(1.07, True), run(1.0, False)).first is None
    assert compare_records(run(1.05, True), run(1.5, True), run(1.0, False)).first is not None


def test_extremes_are_compared_to_one_rounding_unit_of_the_runs_precision():
    """A heavy-tailed bfloat16 gradient (its largest element 16 times its RMS, as attention's value
    gradient in MiniMind's LoRA fine-tune): two honest runs may round the largest element to
    neighbouring bfloat16 values, 0.12 of the RMS apart, where the rounding to bfloat16 against the
    float32 reference (the noise run's measure) moved it by nothing. One unit apart passes, in a
    bfloat16 op and in a float32 op computed from it (under AMP the runs' values carry bfloat16's
    rounding); the largest element 2% off, or every element 5% off, still fails."""
    gradient = torch.randn(4096, generator=torch.Generator().manual_seed(5)) / 64
    gradient[7] = 0.25  # a power of two: exact in bfloat16, 16 times the RMS
    low = gradient.bfloat16()
    neighbour = low.clone()
    neighbour[7] = 0.25 + 2.0**-9  # the next bfloat16 value

    def run(values: torch.Tensor) -> list[dict]:
        return [_op(0, "aten.sum.dim_IntList", values, "lora.py:41"),
                _op(1, "aten.mul.Tensor", values.float() * 0.5, "lora.py:41")]

    amp_original, float32_reference = run(low), run(gradient)
    assert compare_records(amp_original, run(neighbour), float32_reference, rounding="bfloat16").first is None
    float32_only = compare_records(amp_original[1:], run(neighbour)[1:], float32_reference[1:])
    assert float32_only.first is not None  # without the runs' precision, a float32 op's unit is float32's
    peak_off = low.clone()
    peak_off[7] = 0.25 * 1.02
    assert compare_records(amp_original, run(peak_off), float32_reference, rounding="bfloat16").first.seq == 0
    scaled = compare_records(amp_original, run((gradient * 1.05).bfloat16()), float32_reference, rounding="bfloat16")
    assert scaled.first is not None and scaled.first.site == "lora.py:41"

"""The pass rule, thresholds, size parsing, divergence tracing and the entry protocol, in-process."""

from __future__ import annotations

import pytest
import torch

from npu_migrate.verify.analysis import _first_divergence
from npu_migrate.verify.entry import (
    BuildSpec,
    EntryError,
    call_build,
    compute_loss,
    flatten,
    split_entry,
)
from npu_migrate.verify.metrics import compare
from npu_migrate.verify.sizes import format_bytes, parse_size
from npu_migrate.verify.thresholds import ThresholdPolicy, parse_overrides

POLICY = ThresholdPolicy.load()
FP32 = POLICY.for_pair("float32", "float32", amp=False)


def test_msprobe_rule_branches():
    ref = torch.linspace(-1, 1, 1000)
    assert compare("same", ref, ref.clone(), FP32).passed
    tiny = compare("tiny", ref, ref + 1e-7, FP32)
    assert tiny.passed and tiny.cosine == 1.0
    noisy = ref + 0.2 * torch.sin(torch.arange(1000.0) * 7)  # cosine falls below 0.99
    result = compare("noisy", ref, noisy, FP32)
    assert not result.passed and "cosine" in result.reason and result.cosine < 0.99
    offset = compare("offset", ref * 100, ref * 100 + 1.5, FP32)  # cosine ~1 but max abs > 1
    assert not offset.passed and "max abs error" in offset.reason
    bad = ref.clone()
    bad[3] = float("nan")
    assert "NaN/Inf" in compare("nan", ref, bad, FP32).reason
    both_nan = ref.clone()
    both_nan[3] = float("nan")
    assert compare("both", both_nan, both_nan.clone(), FP32).passed  # the reference has it too
    assert "dtype float32 -> float16" in compare("dt", ref, ref.half(), FP32).reason
    assert "shape" in compare("shape", ref, ref[:10], FP32).reason


def test_relative_error_shares_and_the_float32_share_rule():
    ref = torch.ones(1000)
    target = ref.clone()
    target[:20] += 0.002  # 2% of elements between 1/1000 and 5/1000
    target[20:30] += 0.01  # 1% beyond 5/1000
    result = compare("shares", ref, target, FP32)
    assert result.share_rel_1e3 == pytest.approx(0.03) and result.share_rel_5e3 == pytest.approx(0.01)
    assert result.max_rel == pytest.approx(0.01, rel=1e-3) and result.passed
    scaled = compare("scaled", ref, ref * 1.1, FP32)  # msprobe's rule alone misses a rescale
    assert not scaled.passed and "5/1000" in scaled.reason
    msprobe_only = ThresholdPolicy.load({"max_share_rel_5e3": "none"}).for_pair("float32", "float32", False)
    assert compare("scaled", ref, ref * 1.1, msprobe_only).passed


def test_thresholds_are_dtype_and_amp_aware():
    assert FP32.dtype_must_match and FP32.max_share_rel_5e3 == 0.05
    half = POLICY.for_pair("float32", "float16", amp=False)
    assert half.abs_floor > FP32.abs_floor and half.max_share_rel_5e3 is None
    amp = POLICY.for_pair("float32", "float16", amp=True)
    assert not amp.dtype_must_match and amp.cosine_min < FP32.cosine_min
    ref = torch.randn(256)
    assert compare("amp", ref, ref.half(), amp).passed
    assert not compare("no-amp", ref, ref.half(), half).passed  # dtype changed without autocast


def test_threshold_overrides(tmp_path):
    policy = ThresholdPolicy.load(parse_overrides(["cosine_min=0.999", "dtype_must_match=false"]))
    th = policy.for_pair("float32", "float32", amp=False)
    assert th.cosine_min == 0.999 and th.dtype_must_match is False
    path = tmp_path / "t.json"
    path.write_text('{"amp": {"cosine_min": 0.5}, "by_dtype": {"bfloat16": {"abs_floor": 0.1}}}')
    from_file = ThresholdPolicy.load(path=str(path))
    assert from_file.for_pair("float32", "float16", amp=True).cosine_min == 0.5
    assert from_file.for_pair("bfloat16", "bfloat16", amp=False).abs_floor == 0.1
    with pytest.raises(ValueError, match="unknown threshold"):
        ThresholdPolicy.load({"cosine": 1})
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["cosine_min"])
    with pytest.raises(ValueError, match="cannot read"):
        ThresholdPolicy.load(path=str(tmp_path / "missing.json"))


def test_sizes():
    assert parse_size("8GiB") == 8 << 30
    assert parse_size("1.5 MiB") == 3 << 19
    assert parse_size("512MB") == 512_000_000 and parse_size("1000") == 1000
    with pytest.raises(ValueError, match="not a size"):
        parse_size("8 parsecs")
    assert format_bytes(3 << 20) == "3.00 MiB" and format_bytes(512) == "512 B"


def _events(*spec):
    return {"events": [{"module": m, "call": 0, "kind": k, "tensors": [f"{m}/{k}"]} for m, k in spec]}


class _C:
    def __init__(self, passed, name="x"):
        self.passed, self.name = passed, name


def test_first_divergence_names_the_module_where_it_appears():
    order = _events(("<model>", "in"), ("a", "in"), ("a.x", "in"), ("a.x", "out"), ("a.y", "in"),
                    ("a.y", "out"), ("a", "out"), ("<model>", "out"))

    def verdicts(*failing):
        return {n: _C(n not in failing, n) for e in order["events"] for n in e["tensors"]}

    # the output of a.y fails while its input passed: a.y itself
    assert _first_divergence(order, verdicts("a.y/out", "a/out", "<model>/out"))[0] == "a.y"
    # the input of a.y fails: the code of `a` between its children
    assert _first_divergence(order, verdicts("a.y/in", "a.y/out", "a/out", "<model>/out"))[0] == "a"
    # only the top-level input differs
    assert _first_divergence(order, verdicts("<model>/in"))[0] == "<inputs>"
    assert _first_divergence(order, verdicts()) is None


def test_entry_protocol():
    assert split_entry("sub/train.py:build") == ("sub/train.py", "build")
    for bad in ("train.py", "train:build", ":build", "train.py:"):
        with pytest.raises(EntryError):
            split_entry(bad)
    with pytest.raises(EntryError, match=r"torch\.nn\.Module"):
        call_build(lambda: {"model": 3, "batch": torch.ones(1)}, "cpu")
    with pytest.raises(EntryError, match="batch"):
        call_build(lambda device: {"model": torch.nn.Linear(1, 1)}, "cpu")
    seen = []

    class Parts:  # an object with attributes works like a dict
        model = torch.nn.Linear(2, 1)
        batch = torch.ones(3, 2)

    spec = call_build(lambda device: (seen.append(device), Parts())[1], "npu")
    assert seen == ["npu"] and spec.loss_fn is None
    loss = compute_loss(spec, {"logits": torch.ones(2), "ids": torch.ones(2, dtype=torch.long)})
    assert loss.item() == 1.0  # mean of the floating outputs
    assert compute_loss(BuildSpec(spec.model, None), {"loss": torch.tensor(5.0)}).item() == 5.0
    assert [n for n, _ in flatten("o", {"a": (torch.ones(1), [torch.ones(1)])})] == ["o.a.0", "o.a.1.0"]

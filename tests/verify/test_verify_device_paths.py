"""Both sides of script mode take the paths a device takes, so a clean migration runs the same ops,
in the same order, with the same temporaries: optimizers and clip_grad_norm_ on their foreach
kernels (the emulated npu's parameters are a tensor subclass, which torch would loop over per
tensor), dropout as the device's fused kernel (the CPU reference would draw a float mask in three
ops), and the backward pass attributed to the backward() line (autograd runs a device's backward
on a thread of its own, with no frame of the user's code)."""

from __future__ import annotations

import pytest

from npu_migrate.verify.opcompare import compare_records
from npu_migrate.verify.script import ScriptOptions, _job, run_side

TRAIN = """\
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("{device}")
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2)).to(device)
sgd = torch.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9)
adam = torch.optim.Adam(model[4].parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(32, 8).to(device)
    loss = model(x).square().mean()
    sgd.zero_grad()
    adam.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    sgd.step()
    adam.step()
"""


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paths")
    trees = {}
    for name, device in (("original", "cuda"), ("migrated", "npu")):
        trees[name] = tmp / name
        trees[name].mkdir()
        (trees[name] / "train.py").write_text(TRAIN.format(device=device))
    options = ScriptOptions(trees["original"], trees["migrated"], "train.py", steps=3, timeout=180)
    return {side: run_side(_job(options, side, trees[tree], tmp / f"{side}.pt"), options, tmp)
            for side, tree in (("reference", "original"), ("target", "migrated"))}


def _ops(result: dict) -> list[dict]:
    return [e for e in result["record"] if e["kind"] == "op"]


def test_every_op_of_the_reference_has_its_counterpart_in_order(sides):
    reference, target = sides["reference"], sides["target"]
    assert reference["error"] is None and target["error"] is None, (reference["error"], target["error"])
    comparison = compare_records(reference["record"], target["record"], None)
    assert comparison.first is None, comparison.first
    assert comparison.only_reference == 0  # nothing the device runs differently
    extra = {e["name"] for e in _ops(target)} - {e["name"] for e in _ops(reference)}
    assert extra <= {"aten._to_copy.default"}, extra  # the migrated side's own moves to the device


@pytest.mark.parametrize("side", ["reference", "target"])
def test_optimizers_and_clipping_take_the_foreach_kernels_and_dropout_the_fused_one(sides, side):
    names = {e["name"] for e in _ops(sides[side])}
    assert {"aten.add_.List", "aten.lerp_.Scalar", "aten.norm.Scalar"} <= names, names  # SGD, Adam, clipping
    assert "aten.native_dropout.default" in names and "aten.bernoulli_.float" not in names


def test_the_backward_pass_is_attributed_to_the_backward_line(sides):
    for side in ("reference", "target"):
        sites = {e["site"] for e in _ops(sides[side]) if e["phase"] == "backward"}
        assert sites == {"train.py:14"}, (side, sites)


def test_both_sides_measure_the_same_peak(sides):
    reference, target = sides["reference"]["memory"], sides["target"]["memory"]
    assert reference["peak"] > 0 and target["peak"] == reference["peak"], (reference, target)
    assert "train.py:11" in target["by_site"]  # the forward's activations, at their line

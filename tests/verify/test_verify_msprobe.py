"""msprobe interop (issue 26, item 5): a device's L1 dump aligned by API name with a reference run,
and msprobe's comparison columns beside the noise-based verdict.

The dump files are built here in msprobe's layout, from these facts of its public documentation
and code (Ascend/msprobe): `docs/en/dump/pytorch_data_dump_instruct.md`, "dump.json Description",
L1 level: `{"task", "level": "L1", "framework": "pytorch", "dump_data_dir", "data": {NAME: ...}}`,
NAME `{Prefix}.{api}.{call count}.{forward|backward}` with the prefixes Functional, Torch, Tensor,
NPU...; a forward entry holds `input_args`, `input_kwargs` and `output`, a backward entry `input`
and `output`; each tensor `type`, `dtype` ("torch.float32"), `shape`, `Max`, `Min`, `Mean`, `Norm`,
`requires_grad` and, for task "tensor", `data_name`. `python/msprobe/core/dump/data_dump/json_writer.py`
(`write_stack_info_json`): stack.json is `{"0": [[NAME, ...], STACK], ...}`, STACK being the
frames `File PATH, line N, in FUNC, \\n CODE` innermost first; older releases write `{NAME: [frame,
...]}`. The dump's paths are those of the device machine, not ours.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from npu_migrate.cli import main as cli_main
from npu_migrate.verify.msprobe import locate, read_dump, write_dump
from npu_migrate.verify.offline import compare_device_dump, compare_dump_files
from npu_migrate.verify.opcompare import msprobe_columns
from npu_migrate.verify.opcapture import summarise
from npu_migrate.verify.script import ScriptOptions

SCRIPT = """\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(4, 8)
w = torch.randn(16, 8, requires_grad=True)
h = F.linear(x, w)
a = F.relu(h)
n = F.layer_norm(a, (16,), eps=1e-5)
loss = n.pow(2).mean()
loss.backward()
"""
DEVICE_ROOT = "/home/ma-user/work/project"  # where the script sat on the device machine


def _tensor(value: torch.Tensor, name: str) -> dict:
    value = value.detach()
    return {"type": "torch.Tensor", "dtype": str(value.dtype), "shape": list(value.shape),
            "Max": value.max().item(), "Min": value.min().item(), "Mean": value.mean().item(),
            "Norm": value.norm().item(), "requires_grad": value.requires_grad, "data_name": f"{name}.pt"}


def _device_dump(folder: Path, eps: float = 1e-5, old_stack_layout: bool = False) -> Path:
    """The dump msprobe writes for SCRIPT (task "tensor", level L1), computed here in float32;
    `eps` changes the layer_norm as a faulty migration would."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    w = torch.randn(16, 8, requires_grad=True)
    h = F.linear(x, w)
    a = F.relu(h)
    n = F.layer_norm(a, (16,), eps=eps)
    squared = n.pow(2)
    loss = squared.mean()
    loss.backward()
    calls = [("Torch.randn.0", [], x, 5), ("Torch.randn.1", [], w, 6), ("Functional.linear.0", [x, w], h, 7),
             ("Functional.relu.0", [h], a, 8), ("Functional.layer_norm.0", [a], n, 9),
             ("Tensor.pow.0", [n], squared, 10), ("Tensor.mean.0", [squared], loss, 10)]
    data, stacks = {}, {}
    for name, inputs, output, line in calls:
        data[f"{name}.forward"] = {
            "input_args": [_tensor(t, f"{name}.forward.input.{i}") for i, t in enumerate(inputs)],
            "input_kwargs": {}, "output": [_tensor(output, f"{name}.forward.output.0")]}
        stacks[f"{name}.forward"] = [
            "File /usr/local/lib/python3.10/site-packages/msprobe/pytorch/hook_module/wrap.py, line 80, in forward, \n"
            " return self.api(*args) \n",
            f"File {DEVICE_ROOT}/train.py, line {line}, in <module>, \n {SCRIPT.splitlines()[line - 1]} \n"]
    data["Functional.linear.0.backward"] = {"input": [_tensor(torch.ones(4, 16), "g")],
                                            "output": [_tensor(torch.ones(4, 8), "gx"), _tensor(w.grad, "gw")]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "framework": "pytorch",
                                                  "dump_data_dir": f"{DEVICE_ROOT}/dump/step0/rank0/dump_tensor_data",
                                                  "data": data}, indent=1))
    if old_stack_layout:
        stack_document = stacks
    else:
        stack_document = {str(i): [[name], "".join(lines)] for i, (name, lines) in enumerate(stacks.items())}
    (folder / "stack.json").write_text(json.dumps(stack_document, indent=1))
    return folder / "dump.json"


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "train.py").write_text(SCRIPT)
    return tmp_path / "original"


@pytest.mark.parametrize("old_stack_layout", [False, True])
def test_the_dump_is_read_with_the_users_line_from_either_stack_layout(tmp_path, tree, old_stack_layout):
    events = read_dump(_device_dump(tmp_path / "dump", old_stack_layout=old_stack_layout))
    forward = [e for e in events if e["phase"] == "forward"]
    assert [e["name"] for e in forward][:3] == ["Torch.randn", "Torch.randn", "Functional.linear"]
    layer_norm = next(e for e in forward if e["name"] == "Functional.layer_norm")
    assert layer_norm["stack"][-1] == f"{DEVICE_ROOT}/train.py:9"
    assert locate(layer_norm["stack"], tree) == "train.py:9"  # the msprobe frame has no file in the tree


def test_a_device_dump_aligns_with_the_reference_by_api_name(tmp_path, tree):
    store = tmp_path / "store"
    options = ScriptOptions(tree, tree, "train.py", steps=1, timeout=120, reference_store=store)
    clean = compare_device_dump(options, _device_dump(tmp_path / "clean"))
    assert clean.verdict == "pass", clean.reason
    assert clean.comparison.matched >= 7
    rows = {row["op"]: row for row in clean.comparison.rows}
    assert rows["linear"]["api"] == "Functional.linear" and rows["linear"]["Max diff"] == pytest.approx(0, abs=1e-6)
    options = ScriptOptions(tree, tree, "train.py", steps=1, timeout=120, reference_store=store)
    faulty = compare_device_dump(options, _device_dump(tmp_path / "faulty", eps=0.5))
    assert faulty.verdict == "fail", faulty.reason
    assert faulty.comparison.first.site == "train.py:9" and faulty.comparison.first.name == "layer_norm"
    assert faulty.data["reference_store"]["reused"] == ["reference", "noise"]  # computed once, by the clean call


def test_dumps_of_different_levels_are_refused_in_one_line(tmp_path):
    ours = write_dump(tmp_path / "ours", [{"kind": "op", "name": "aten.mm.default", "phase": "forward",
                                           "site": "train.py:3", "outputs": [summarise(torch.ones(2, 2))]}], str(tmp_path))
    outcome = compare_dump_files(ours, _device_dump(tmp_path / "device"))
    assert outcome.verdict == "error" and "--device-dump" in outcome.reason
    result = CliRunner().invoke(cli_main, ["verify", "--compare-dumps", str(ours), str(tmp_path / "device" / "dump.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_two_l1_dumps_compare_by_api_and_locate_the_changed_api(tmp_path):
    outcome = compare_dump_files(_device_dump(tmp_path / "a"), _device_dump(tmp_path / "b", eps=0.5))
    assert outcome.verdict == "fail" and outcome.comparison.first.name == "layer_norm"


def test_msprobe_columns_follow_its_formulas():
    bench = torch.tensor([1.0, 2.0, -4.0, 8.0])
    npu = torch.tensor([1.0, 2.002, -4.0, 8.1])
    columns = msprobe_columns(summarise(bench), summarise(npu))
    assert columns["Cosine"] == pytest.approx(float(F.cosine_similarity(bench.double(), npu.double(), dim=0)), rel=1e-9)
    assert columns["MaxAbsErr"] == pytest.approx(0.1, rel=1e-5)
    assert columns["MaxRelativeErr"] == pytest.approx(0.0125, rel=1e-4)
    assert columns["One Thousandth Err Ratio"] == 0.5  # 2.002 is off by exactly 1/1000: not below it
    assert columns["Five Thousandth Err Ratio"] == 0.75
    assert columns["L2norm diff"] == pytest.approx(float(npu.norm() - bench.norm()), rel=1e-5)

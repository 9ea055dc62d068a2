"""The portable forms of device indices and device settings, end to end and in process (fast):
`.cuda(rank)`, `f"cuda:{rank}"`, `torch.device("cuda", i)`, `set_device`, `"cuda" in device`,
`x.is_cuda`, a module-level `device = "cuda"` constant, an argparse `--device` option and a
backend setting. The migrated script keeps no CUDA code, gives the original's result on plain
CPU torch, takes the NPU branch with the hccl backend under the NPU emulation, and a second apply changes
nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

REPO = Path(__file__).resolve().parents[2]

ORIGINAL = '''\
import argparse
import torch

device = "cuda"
backend = "nccl"
parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
args = parser.parse_args([])
device_type = "cuda" if "cuda" in args.device else "cpu"
rank = 0
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
x = torch.ones(2, 4)
if torch.cuda.is_available():
    torch.cuda.set_device(rank)
    model = model.cuda(rank)
    x = x.to(f"cuda:{rank}")
    y = torch.zeros(1, device=torch.device("cuda", rank)) + torch.zeros(1, device=device)
else:
    y = torch.zeros(1)
if x.is_cuda:
    torch.cuda.synchronize()
print(f"{model(x).sum().item() + y.sum().item():.6f}", device_type, args.device, x.device.type, backend)
'''
SPECIFIC = re.compile(r"\bcuda\b|\bnccl\b|\bnpu\b|\bhccl\b|torch_npu")


def _migrate(text: str) -> str | None:
    rules = select_rules(all_rules(), select=[])
    outcome = migrate_text(text, "train.py", RuleSet(rules, {"target": "portable"}))
    assert outcome.error is None, outcome.error
    return outcome.new_text


@pytest.fixture(scope="module")
def migrated() -> str:
    text = _migrate(ORIGINAL)
    assert text is not None
    return text


def test_no_cuda_code_is_left_and_a_second_apply_changes_nothing(migrated: str) -> None:
    assert not SPECIFIC.search(migrated), migrated
    assert "torch.device(DEVICE.type, rank)" in migrated and 'f"{DEVICE.type}:{rank}"' in migrated
    assert "model.to(torch.device(DEVICE.type, rank))" in migrated
    assert '"cpu" not in args.device' in migrated and "device = DEVICE.type" in migrated
    assert _migrate(migrated) is None


# One fresh interpreter (the emulation, once used in a process, leaves PrivateUse1 registered):
# the original and the migrated script on plain CPU torch, then the migrated one emulated.
_RUNS = """
import contextlib, io, json, sys, torch
from npu_migrate.emulation import emulated
assert torch.accelerator.current_accelerator() is None, "not plain CPU torch"
original, migrated = json.load(sys.stdin)
def run(text):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, "train.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip()
outputs = [run(original), run(migrated)]
with emulated():
    outputs.append(run(migrated))
print(json.dumps(outputs))
"""


@pytest.fixture(scope="module")
def outputs(migrated: str) -> list[list[str]]:
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", _RUNS], input=json.dumps([ORIGINAL, migrated]),
                         capture_output=True, text=True, timeout=300, check=False,
                         env=dict(os.environ, PYTHONPATH=str(REPO), TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    assert run.returncode == 0, run.stderr[-2000:]
    return [line.split() for line in json.loads(run.stdout)]


def test_the_same_result_on_plain_cpu_torch(outputs: list[list[str]]) -> None:
    original, portable, _ = outputs
    assert portable[:4] == original[:4] == [original[0], "cpu", "cpu", "cpu"]
    assert portable[4] == "gloo" and original[4] == "nccl"  # the device's own backend


def test_the_npu_branch_under_the_emulation(outputs: list[list[str]]) -> None:
    # npu tensors are on the emulated device: the script's x.device.type reads "npu", as on a device
    original, _, (value, device_type, option, _, backend) = outputs
    assert (device_type, option, backend) == ("npu", "npu", "hccl")
    assert float(value) == pytest.approx(float(original[0]), abs=1e-3)

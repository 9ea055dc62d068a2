"""Script mode end to end: a real (tiny) training script run unmodified in two trees, in real
subprocesses; faults injected into the migrated tree are found at their line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.verify.script import ScriptOptions, verify_script

TRAIN = '''import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = self.norm(h)
        return self.fc2(h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    torch.manual_seed(1)
    device = torch.device("cuda")
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    data = torch.randn(32, 8)
    target = torch.randint(0, 4, (32,))
    for step in range(5):
        x = data[step * 4:(step + 1) * 4].to(device)
        y = target[step * 4:(step + 1) * 4].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
        mask = torch.ones(4, 4).to(device)
        print(f"mask {mask.sum().item():.0f}")


if __name__ == "__main__":
    main()
'''

# (name, old text, new text, the line the finding must name, finding code)
CASES = [
    ("clean", None, None, None, None),
    ("eps", "nn.LayerNorm(16)", "nn.LayerNorm(16, eps=1e-3)", 12, "VER001"),
    ("cpu_batch", "x = data[step * 4:(step + 1) * 4].to(device)", "x = data[step * 4:(step + 1) * 4]", 32, "VER004"),
    ("seed", "torch.manual_seed(1)", "torch.manual_seed(2)", 25, "VER005"),
    # a tensor left on the host that no op meets with device tensors in the steps run
    ("host_mask", "mask = torch.ones(4, 4).to(device)", "mask = torch.ones(4, 4)", 39, "VER004"),
    ("functional_relu", "h = F.relu(self.fc1(x))", "h = torch.clamp_min(self.fc1(x), 0.0)", None, None),
    # device precision (HF32 matmul switched on by the migrated code): noise, not a fault ...
    ("hf32", "    torch.manual_seed(1)", "    torch.npu.matmul.allow_hf32 = True\n    torch.manual_seed(1)", None, None),
    # ... unless something else changed too
    ("hf32_eps", "nn.LayerNorm(16)", "nn.LayerNorm(16, eps=1e-3)", 12, "VER001"),
]
HF32_SWITCH = ("    torch.manual_seed(1)", "    torch.npu.matmul.allow_hf32 = True\n    torch.manual_seed(1)")


def _tree(root: Path, device: str, old: str | None = None, new: str | None = None, hf32: bool = False) -> Path:
    root.mkdir(parents=True)
    text = TRAIN.replace('"cuda"', f'"{device}"')
    if device == "npu":
        text = text.replace("import torch\n", "import torch\nimport torch_npu\n", 1)
    for before, after in ([(old, new)] if old is not None else []) + ([HF32_SWITCH] if hf32 else []):
        assert before in text
        text = text.replace(before, after, 1)
    (root / "train.py").write_text(text)
    return root


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("script")
    original = _tree(tmp / "original", "cuda")
    cache: dict = {}
    results = {}
    for name, old, new, _, _ in CASES:
        migrated = _tree(tmp / name, "npu", old, new, hf32=name == "hf32_eps")
        results[name] = verify_script(ScriptOptions(original, migrated, "train.py", ["--lr", "0.1"], steps=3,
                                                    device_precision=name.startswith("hf32"), timeout=300), cache)
    return results


def test_clean_migration_passes_and_says_what_an_emulated_pass_proves(outcomes):
    outcome = outcomes["clean"]
    assert (outcome.verdict, outcome.exit_code) == ("pass", 0), outcome.reason
    assert outcome.data["steps_run"] == 3 and outcome.comparison.matched > 50
    assert "does not prove" in outcome.data["scope"] and "kernel noise" in outcome.data["noise"]


@pytest.mark.parametrize("name,line,code", [(c[0], c[3], c[4]) for c in CASES if c[3]])
def test_fault_is_found_at_the_users_line(outcomes, name, line, code):
    outcome = outcomes[name]
    assert (outcome.verdict, outcome.exit_code) == ("fail", 1), outcome.reason
    assert f"train.py:{line}" in outcome.sites(), (outcome.sites(), outcome.reason)
    finding = outcome.findings()[0]
    assert finding.code == code and finding.path.endswith(f"{name}/train.py")


def test_eps_divergence_names_the_module_and_where_it_was_built(outcomes):
    first = outcomes["eps"].comparison.first
    assert first.name == "aten.native_layer_norm.default" and first.site == "train.py:17"
    assert first.module == {"path": "norm", "class": "LayerNorm", "built": "train.py:12"}
    assert first.step == -1  # the first forward, before any backward


def test_cpu_tensor_error_says_where_it_was_made(outcomes):
    message = outcomes["cpu_batch"].error["message"]
    assert "npu:0 and cpu!" in message and "cpu_batch/train.py:32" in message


def test_hf32_noise_is_measured_and_passes_while_a_fault_under_hf32_fails(outcomes):
    clean = outcomes["hf32"]
    assert clean.verdict == "pass", clean.reason
    assert "HF32 matmul" in clean.data["noise"]
    assert clean.comparison.worst_ratio > 0  # the device's rounding was there, and measured
    assert outcomes["hf32_eps"].comparison.first.site == "train.py:17"


def test_seed_divergence_gives_both_values(outcomes):
    assert "seeded with 2, the original with 1" in outcomes["seed"].reason


def test_functional_replacement_compares_at_the_next_common_op(outcomes):
    outcome = outcomes["functional_relu"]
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.comparison.only_reference >= 1 and outcome.comparison.only_migrated >= 1


def test_a_script_that_runs_too_long_is_reported_as_a_timeout(tmp_path):
    for side in ("original", "migrated"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "slow.py").write_text("import time\ntime.sleep(60)\n")
    outcome = verify_script(ScriptOptions(tmp_path / "original", tmp_path / "migrated", "slow.py", timeout=3,
                                          noise_run=False))
    assert outcome.verdict == "error" and "timed out after 3 s" in outcome.reason


def _cli(args):
    from npu_migrate.cli import main

    return CliRunner().invoke(main, ["verify", *args])


def test_cli_argument_errors_are_one_line_exit_2(tmp_path):
    _tree(tmp_path / "a", "cuda")
    (tmp_path / "b").mkdir()
    missing = _cli(["--original", str(tmp_path / "a"), "--migrated", str(tmp_path / "b"), "--", "train.py"])
    assert missing.exit_code == 2 and "b/train.py: script not found (--migrated tree)" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    both = _cli(["--original", str(tmp_path / "a"), "--migrated", str(tmp_path / "a"), "--entry", "x.py:f",
                 "--", "train.py"])
    assert both.exit_code == 2 and "not both" in both.output
    bad_dump = tmp_path / "dump.json"
    bad_dump.write_text("{not json")
    offline = _cli(["--compare-dumps", str(bad_dump), str(bad_dump)])
    assert offline.exit_code == 2 and f"{bad_dump}: not an msprobe dump.json" in offline.output


def test_msprobe_dumps_round_trip_and_compare_offline(outcomes, tmp_path):
    from npu_migrate.verify.msprobe import read_dump, write_dump
    from npu_migrate.verify.offline import compare_dump_files

    events = outcomes["clean"].records["migrated"]
    reference = write_dump(tmp_path / "ref", events, "/tree")
    document = json.loads(reference.read_text())
    name = next(n for n in document["data"] if n.startswith("Aten.native_layer_norm.default.0.forward"))
    assert set(document["data"][name]["output"][0]) >= {"Max", "Min", "Mean", "Norm", "shape", "dtype"}
    assert json.loads((tmp_path / "ref" / "stack.json").read_text())[name] == ["File /tree/train.py, line 17"]
    assert len(read_dump(reference)) == len([e for e in events if e["kind"] in ("op", "loss")])
    shutil.copytree(tmp_path / "ref", tmp_path / "device")
    assert compare_dump_files(reference, tmp_path / "device" / "dump.json").verdict == "pass"
    document["data"][name]["output"][0]["Norm"] *= 1.01
    (tmp_path / "device" / "dump.json").write_text(json.dumps(document))
    outcome = compare_dump_files(reference, tmp_path / "device" / "dump.json")
    assert outcome.verdict == "fail" and outcome.location == "/tree/train.py:17"


CPU_ADAMW = """import torch
from torch.optim.optimizer import _default_to_fused_or_foreach
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(10, 8), *[torch.nn.Linear(8, 8) for _ in range(4)], torch.nn.Linear(8, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
print(f"foreach {int(_default_to_fused_or_foreach(list(model.parameters()), False, False)[1])}")
for step in range(3):
    loss = model(torch.randint(0, 10, (16,))).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_script_that_trains_on_the_cpu_passes_against_itself(tmp_path):
    """A script that keeps its model on the CPU (makemore's default --device) runs the same
    optimizer kernels on both sides: the reference takes the foreach path a GPU takes, and so must
    the migrated side's CPU tensors (they looped per parameter: a clean makemore migration failed)."""
    for name in ("original", "migrated"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(CPU_ADAMW)
    outcome = verify_script(ScriptOptions(tmp_path / "original", tmp_path / "migrated", "train.py", steps=2,
                                          timeout=300))
    assert outcome.verdict == "pass", outcome.reason
    said = {side: [e["text"] for e in events if e["kind"] == "print"] for side, events in outcome.records.items()}
    assert said["migrated"] == said["reference"] == ["foreach 1"]

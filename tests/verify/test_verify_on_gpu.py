"""Issue 17, item 7 and issue 26, item 6: `verify --reference cuda`, `--backing cuda` and
`--portable --devices cpu,cuda` on a real GPU. Skipped where torch sees no CUDA device (CI, the
development machines); a session lent a GPU runs `bash bench/gpu_check.sh`, which runs this file
there (written for torch 2.11, the GPU machines' version, as well as 2.13).

The same script and faults as tests/verify/test_verify_script.py's, so a GPU result reads against
the CPU one: a clean migration passes, a batch left on the host is caught at its line, a changed
LayerNorm eps is caught at the line that built the module. A convolutional model shows the TF32
point: cuDNN computes float32 convolutions in TF32 by default on an Ampere or later GPU (and the
script asks for it too); the CUDA reference keeps TF32 off, so the emulated side (float32, or HF32
with --device-precision) is compared with a float32 truth."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from npu_migrate.cli import main as cli_main
from npu_migrate.verify.script import ScriptOptions, verify_script

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu_check.sh)")

TRAIN = """\
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 8).to(device)
    y = torch.randint(0, 2, (4,)).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
"""

CONV_TRAIN = """\
import torch
from torch import nn

torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = True
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(3):
    x = torch.randn(8, 3, 32, 32).to(device)
    y = torch.randint(0, 4, (8,)).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
"""

FAULTS = {  # name: (original text, faulty text, line the finding must name)
    "host_batch": ("x = torch.randn(4, 8).to(device)", "x = torch.randn(4, 8)", 9),
    "eps": ("nn.LayerNorm(16)", "nn.LayerNorm(16, eps=1e-3)", 6),
}


def _migrated(tmp_path: Path, fault: str | None = None, script: str = TRAIN,
              faults: dict | None = None) -> tuple[Path, Path]:
    """The original tree and its `apply` (npu target) copy, with one fault put into the copy."""
    original, migrated = tmp_path / "original", tmp_path / f"migrated-{fault or 'clean'}"
    original.mkdir(exist_ok=True)
    (original / "train.py").write_text(script)
    result = CliRunner().invoke(cli_main, ["apply", str(original), "--output-dir", str(migrated), "--no-cache"])
    assert result.exit_code == 0, result.output
    if fault:
        before, after, _ = (faults or FAULTS)[fault]
        text = (migrated / "train.py").read_text()
        assert before in text
        (migrated / "train.py").write_text(text.replace(before, after, 1))
    return original, migrated


@pytest.mark.parametrize("backing", ["cpu", "cuda"])
def test_a_clean_migration_passes_against_a_gpu_reference(tmp_path, backing):
    original, migrated = _migrated(tmp_path)
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", steps=3, reference="cuda",
                                          backing=backing, timeout=300))
    assert (outcome.verdict, outcome.exit_code) == ("pass", 0), outcome.reason
    assert outcome.data["steps_run"] == 3 and outcome.comparison.matched > 20
    assert "cuda" in str(outcome.data.get("reference", "")).lower(), outcome.data


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_is_located_against_a_gpu_reference(tmp_path, fault):
    original, migrated = _migrated(tmp_path, fault)
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", steps=3, reference="cuda", timeout=300))
    assert (outcome.verdict, outcome.exit_code) == ("fail", 1), outcome.reason
    assert f"train.py:{FAULTS[fault][2]}" in outcome.sites(), (outcome.sites(), outcome.reason)


def test_portable_code_gives_the_cpus_numbers_on_the_gpu(tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "train.py").write_text(TRAIN)
    runner = CliRunner()
    applied = runner.invoke(cli_main, ["apply", str(tmp_path / "cuda"), "--target", "portable", "--no-cache",
                                       "--output-dir", str(tmp_path / "portable")])
    assert applied.exit_code == 0, applied.output
    result = runner.invoke(cli_main, ["verify", "--portable", str(tmp_path / "portable"), "--devices", "cpu,cuda",
                                      "--format", "json", "--", "train.py"])
    assert result.exit_code == 0, result.output
    import json

    outcome = json.loads(result.output)["cuda"]
    assert outcome["verdict"] == "pass" and outcome["matched_ops"] > 20


CONV_FAULTS = {"batchnorm_momentum": ("nn.BatchNorm2d(16)", "nn.BatchNorm2d(16, momentum=0.01)", 8)}


@pytest.mark.parametrize("backing", ["cpu", "cuda"])
def test_a_conv_model_passes_against_a_float32_gpu_reference(tmp_path, backing):
    original, migrated = _migrated(tmp_path, script=CONV_TRAIN)
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", steps=3, reference="cuda",
                                          backing=backing, timeout=300))
    assert (outcome.verdict, outcome.exit_code) == ("pass", 0), outcome.reason
    assert outcome.data["reference"] == "cuda (TF32 off)"
    assert "torch.backends.cudnn.allow_tf32 = True at" in outcome.data["tf32"], outcome.data
    assert outcome.data["memory"]["measured"], outcome.data["memory"]


def test_a_conv_models_running_statistics_fault_is_located_against_a_gpu_reference(tmp_path):
    original, migrated = _migrated(tmp_path, "batchnorm_momentum", CONV_TRAIN, CONV_FAULTS)
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", steps=3, reference="cuda", timeout=300))
    assert (outcome.verdict, outcome.exit_code) == ("fail", 1), outcome.reason
    assert "train.py:8" in outcome.sites(), (outcome.sites(), outcome.reason)

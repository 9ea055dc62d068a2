"""The migrated demo project imports and runs a training step on CPU through the emulation
layer (the test stand-in for torch_npu), proving the rewritten code is valid and consistent."""

import os
import shutil
import subprocess
import sys

DEMO = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "cuda_project")


def test_migrated_demo_trains_one_step_on_emulated_npu(tmp_path):
    out = tmp_path / "migrated"
    apply = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", DEMO, "--output-dir", str(out),
                            "--no-cache", "--isolated"], capture_output=True, text=True, timeout=120)
    assert apply.returncode == 0, apply.stderr
    train = (out / "train.py").read_text()
    assert "torch.cuda" not in train and '"nccl"' not in train and "import torch_npu" in train
    run = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", "train.py", "--steps", "1"],
                         cwd=out, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "training on npu" in run.stdout
    assert (out / "cuda_model.pt").exists()  # a path, not a device: the name was kept


def test_original_demo_still_fails_to_find_cuda_on_cpu(tmp_path):
    """The control: unmigrated, the demo asks for CUDA and falls back to the CPU."""
    copy = tmp_path / "orig"
    shutil.copytree(DEMO, copy)
    run = subprocess.run([sys.executable, "train.py", "--steps", "1"], cwd=copy, capture_output=True,
                         text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "training on cpu" in run.stdout

"""Issue 15's done-when, end to end: a CUDA training script (CPU fallback, seeding, AMP, a
DataLoader, DDP when launched with several processes) migrated with `apply --target portable`
keeps no CUDA- or NPU-specific code, gives the original's loss on plain CPU torch, runs under the
NPU emulation on device `npu` with a loss within bf16 noise, and a second apply changes nothing.
Each run is a real `python` process with real torch (CPU)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("cuda_train.py")
# what must not survive: CUDA and NPU spellings (a guarded optional `import torch_npu` aside)
SPECIFIC = re.compile(r"\bcuda\b|\bnccl\b|\bnpu\b|\bhccl\b|torch_npu", re.I)


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.pop("WORLD_SIZE", None)
    return env


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=600)


def _apply(script: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run("-m", "npu_migrate", "apply", "--target", "portable", "--no-cache", "--isolated",
                *extra, str(script), cwd=script.parent)


def _result(run: subprocess.CompletedProcess[str]) -> tuple[str, float]:
    assert run.returncode == 0, run.stderr[-2000:]
    device = re.search(r"^device=(\w+)$", run.stdout, re.M)
    loss = re.search(r"^loss=([-\d.]+)$", run.stdout, re.M)
    assert device and loss, run.stdout
    return device.group(1), float(loss.group(1))


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, float]]:
    folder = tmp_path_factory.mktemp("portable")
    script = folder / "train.py"
    shutil.copy(FIXTURE, script)
    original = _result(_run(str(script), cwd=folder))
    applied = _apply(script)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return script, original


def test_no_cuda_or_npu_code_is_left(migrated) -> None:
    script, _ = migrated
    text = script.read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert SPECIFIC.findall(code.split('"""', 2)[-1]) == []  # the module docstring may say CUDA
    assert "torch.accelerator.current_accelerator()" in text


def test_runs_on_plain_cpu_torch_with_the_original_loss(migrated) -> None:
    script, (device, loss) = migrated
    assert device == "cpu"
    assert _result(_run(str(script), cwd=script.parent)) == ("cpu", loss)


def test_runs_under_the_emulation_on_npu_within_bf16_noise(migrated) -> None:
    script, (_, loss) = migrated
    device, emulated_loss = _result(_run("-m", "npu_migrate.emulation", str(script), cwd=script.parent))
    assert device == "npu"
    # AMP is on under the emulated npu (bf16 autocast), off on CPU: bf16 has 8 bits of mantissa
    assert emulated_loss == pytest.approx(loss, rel=2 ** -6)


def test_a_second_apply_changes_nothing(migrated) -> None:
    script, _ = migrated
    before = script.read_bytes()
    check = _apply(script, "--check")
    assert check.returncode == 0, check.stdout + check.stderr  # exit 1 if anything would change
    assert "0 would change" in check.stderr
    assert _apply(script).returncode == 0
    assert script.read_bytes() == before

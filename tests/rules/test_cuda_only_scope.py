"""NPU511: through other modules, only what a CUDA branch itself calls makes it a CUDA-only path.
A function that merely reaches such a module elsewhere (timm's `train.py` `main()` reaches apex
through `timm.layers.fast_norm`) keeps its other CUDA guards migrable: never half-migrated
(a guard kept on CUDA around a body rewritten to the NPU)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from npu_migrate.commands.apply import command

KERNELS = "import triton\n\n\ndef fused(x):\n    return x\n"
TRAIN = '''\
import torch

from pkg.kernels import fused


def main(x):
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
    y = fused(x)
    if torch.cuda.is_available():
        y = fused(y)
    return y
'''


def test_only_the_branch_that_calls_cuda_only_code_stays_on_cuda(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kernels.py").write_text(KERNELS)
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "."], catch_exceptions=False)
    text = train.read_text()
    # the settings branch moves to the NPU as a whole ...
    assert "    if torch.npu.is_available():\n        torch.npu.matmul.allow_hf32 = True\n" in text
    # ... the branch that calls the Triton kernel keeps its CUDA guard and is reported
    assert "    if torch.cuda.is_available():\n        y = fused(y)\n" in text
    assert [line.split(":")[1] for line in result.stdout.splitlines() if " NPU511 " in line] == ["10"]


def test_an_attribute_named_like_a_cuda_only_function_is_no_call_of_it(tmp_path: Path, monkeypatch) -> None:
    # timm's benchmark.py defines `benchmark()` (reaching apex) and sets `cudnn.benchmark`
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kernels.py").write_text(KERNELS)
    script = tmp_path / "bench.py"
    script.write_text("import torch\nfrom pkg.kernels import fused\n\n\ndef benchmark(x):\n    return fused(x)\n\n\n"
                      "if torch.cuda.is_available():\n    torch.backends.cudnn.benchmark = True\n")
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(command, ["--isolated", "--no-cache", "."], catch_exceptions=False)
    assert "if torch.npu.is_available():\n" in script.read_text()

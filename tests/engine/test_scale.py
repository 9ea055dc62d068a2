"""Big files (issue 13, scale): a file above the per-file size limit is an error that names
the limit and how to raise it; it is left untouched and the rest of the run goes on."""

import os

from click.testing import CliRunner

from npu_migrate.apply.runner import MAX_FILE_BYTES, MAX_FILE_BYTES_VARIABLE, RunPlan
from npu_migrate.cli import main

CUDA = "import torch\nx = torch.ones(2).cuda()\n"


def invoke(*args):
    return CliRunner().invoke(main, ["apply", "--no-cache", "--isolated", "--select", "NPU10", *map(str, args)])


def test_a_file_over_the_limit_is_an_error_and_the_limit_can_be_raised(tmp_path, monkeypatch):
    big = tmp_path / "big.py"
    big.write_text(CUDA + "".join(f"y{i} = torch.zeros({i}).cuda()\n" for i in range(100)))
    (tmp_path / "small.py").write_text(CUDA)
    monkeypatch.setenv(MAX_FILE_BYTES_VARIABLE, "1000")
    result = invoke(tmp_path)
    assert result.exit_code == 1
    size = os.path.getsize(big)
    assert (f"{big}:0:0: {size / 2**20:.1f} MiB is over the per-file limit of 0.0 MiB; left untouched "
            f"(raise it with {MAX_FILE_BYTES_VARIABLE}=<bytes>)") in result.output
    assert ".cuda()" in big.read_text() and ".npu()" in (tmp_path / "small.py").read_text()
    monkeypatch.setenv(MAX_FILE_BYTES_VARIABLE, str(size))
    assert invoke(tmp_path).exit_code == 0
    assert ".cuda()" not in big.read_text()


def test_the_default_limit_and_zero_for_none(monkeypatch):
    monkeypatch.delenv(MAX_FILE_BYTES_VARIABLE, raising=False)
    assert RunPlan([]).max_file_bytes == MAX_FILE_BYTES == 2 * 1024 * 1024
    monkeypatch.setenv(MAX_FILE_BYTES_VARIABLE, "0")
    assert RunPlan([]).max_file_bytes == 0

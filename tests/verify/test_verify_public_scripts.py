"""What real public scripts needed from script mode (issue 17): a project's packages imported from
the tree's root, PYTHONPATH entries mapped per tree, DataLoader workers, a tensor left on the CPU
traced to the line that stopped moving it, a dropped detach, the device's autocast lists, and the
--portable and --reference cuda paths (the latter with a fake GPU: no GPU was available)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from npu_migrate.cli import main as cli_main
from npu_migrate.emulation._autocast import DeviceAutocast
from npu_migrate.verify import script_runner, tf32
from npu_migrate.verify.opcapture import MoveWatcher, Record, Sites
from npu_migrate.verify.runner import Side
from npu_migrate.verify.script import (
    ScriptOptions,
    _in_tree,
    missing_before_error,
    missing_moves,
    verify_script,
)


def _trees(tmp_path: Path, original: str, migrated: str) -> tuple[Path, Path]:
    for name, text in (("original", original), ("migrated", migrated)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(textwrap.dedent(text))
    return tmp_path / "original", tmp_path / "migrated"


def test_moves_the_migrated_code_no_longer_makes_are_found_at_its_line(tmp_path):
    original, migrated = _trees(tmp_path, """\
        import torch
        x, y = x.to(device), y.to(device)
        out = model(x)
        """, """\
        import torch
        import torch_npu
        x, y = x, y.to(device)
        out = model(x)
        """)
    reference = [{"kind": "move", "site": "train.py:2", "shape": [4, 8]},
                 {"kind": "move", "site": "train.py:2", "shape": [4]}]
    target = [{"kind": "move", "site": "train.py:3", "shape": [4]}]
    found = missing_moves(reference, target, str(original), str(migrated))
    assert found == [{"site": "train.py:2", "mapped_site": "train.py:3", "shape": [4, 8]}]
    both = target + [{"kind": "move", "site": "train.py:3", "shape": [4, 8]}]
    assert missing_moves(reference, both, str(original), str(migrated)) == []


def test_move_watcher_records_the_users_own_moves_only(tmp_path, monkeypatch):
    for name in ("to", "cuda"):
        monkeypatch.setattr(torch.Tensor, name, getattr(torch.Tensor, name))  # restored afterwards
    record = Record()
    MoveWatcher(record, Sites(str(tmp_path))).install()
    script = tmp_path / "user.py"
    script.write_text("import torch\nx = torch.ones(2, 3)\ny = x.to('cpu')\nz = x.to(torch.float64)\n")
    exec(compile(script.read_text(), str(script), "exec"), {})
    torch.ones(2).to("cpu")  # not the user's line: not recorded
    moves = [(e["site"], e["shape"]) for e in record.events if e["kind"] == "move"]
    assert moves == [("user.py:3", [2, 3])]  # a dtype change is not a move


def test_a_dropped_detach_is_located_at_the_call_the_migration_removed(tmp_path):
    original, migrated = _trees(tmp_path, """\
        def repackage(h):
            return h.detach()
        hidden = repackage(hidden)
        out = model(data, hidden)
        """, """\
        def repackage(h):
            return h.detach()
        out = model(data, hidden)
        """)
    op = {"kind": "op", "outputs": [{"shape": [2], "dtype": "float32"}]}
    reference = [{**op, "name": "aten.mm.default", "site": "train.py:4", "step": 0},
                 {**op, "name": "aten.detach.default", "site": "train.py:2", "stack": ["train.py:2", "train.py:3"],
                  "step": 1},
                 {**op, "name": "aten.mm.default", "site": "train.py:4", "step": 1}]
    target = [{**op, "name": "aten.mm.default", "site": "train.py:3", "step": 0},
              {**op, "name": "aten.mm.default", "site": "train.py:3", "step": 1}]
    missing = missing_before_error(reference, target)
    assert missing is not None and missing["name"] == "aten.detach.default"
    assert missing["stack"] == ["train.py:2", "train.py:3"]
    from npu_migrate.verify.script import line_unchanged

    assert line_unchanged(original, migrated, "train.py:2")
    assert not line_unchanged(original, migrated, "train.py:3")


def test_pythonpath_entries_inside_the_original_tree_point_into_each_tree(tmp_path):
    original, migrated = tmp_path / "a", tmp_path / "b"
    (original / "src").mkdir(parents=True)
    assert _in_tree(str(original / "src"), str(original.resolve()), str(migrated)) == str(migrated / "src")
    assert _in_tree("/usr/lib/python", str(original.resolve()), str(migrated)) == "/usr/lib/python"


def test_device_autocast_uses_the_devices_lists_not_the_cpus():
    x = torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_softmax = torch.softmax(x @ x, -1).dtype
        with DeviceAutocast("cpu"):
            product = x @ x
            results = {"mm": product.dtype, "softmax": torch.softmax(product, -1).dtype,
                       "layer_norm": torch.nn.functional.layer_norm(product, (4,)).dtype,
                       "einsum": torch.einsum("ij,jk->ik", x, x).dtype, "relu": torch.relu(product).dtype}
    assert cpu_softmax == torch.bfloat16  # what the CPU's own lists give
    assert results == {"mm": torch.bfloat16, "softmax": torch.float32, "layer_norm": torch.float32,
                       "einsum": torch.bfloat16, "relu": torch.bfloat16}
    with DeviceAutocast("cpu"):  # autocast off: nothing is cast
        assert torch.softmax(x.bfloat16(), -1).dtype == torch.bfloat16


def test_dataloader_workers_run_in_the_main_process(monkeypatch):
    from torch.utils.data import DataLoader

    monkeypatch.setattr(DataLoader, "__init__", DataLoader.__init__)
    script_runner._data_in_process()
    data = list(range(6))
    assert DataLoader(data, 2, False, None, None, 3).num_workers == 0
    loader = DataLoader(data, batch_size=2, num_workers=2, persistent_workers=True, prefetch_factor=4)
    assert loader.num_workers == 0 and [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]


def test_reference_cuda_and_portable_cuda_paths_with_a_fake_gpu(monkeypatch):
    """No GPU was lent to this work: the code paths are checked with torch.cuda faked, not on hardware."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="--reference cuda: no CUDA device"):
        script_runner._setup({"side": "reference", "reference": "cuda"})
    with pytest.raises(RuntimeError, match="device cuda: no CUDA device"):
        script_runner._setup({"side": "target", "target_device": "cuda", "portable": True})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    turned_off = []
    monkeypatch.setattr(tf32, "keep_off", lambda: turned_off.append(True))  # tests/verify/test_verify_gpu_half.py
    assert script_runner._setup({"side": "reference", "reference": "cuda"}) == "cuda (TF32 off)"
    assert script_runner._setup({"side": "target", "target_device": "cuda", "portable": True}) == "cuda"
    side = Side({"side": "reference", "reference": "cuda"})
    assert (side.device, side.backend, side.stats) == ("cuda", "cuda (TF32 off)", torch.cuda)
    assert turned_off == [True, True]


@pytest.mark.parametrize("arguments, message", [
    (["--portable", "T", "--devices", "npu,cpu", "--", "train.py"], "the reference 'cpu' first"),
    (["--portable", "T", "--original", "A", "--", "train.py"], "replaces --original"),
    (["--portable", "T"], "nothing to run"),
])
def test_portable_usage_errors_are_one_line_and_exit_2(tmp_path, arguments, message):
    (tmp_path / "T").mkdir()
    result = CliRunner().invoke(cli_main, ["verify", *[str(tmp_path / a) if a in "TA" else a for a in arguments]])
    assert result.exit_code == 2 and message in result.output


def test_portable_cuda_needs_the_portable_flag(tmp_path):
    original, migrated = _trees(tmp_path, "print(1)\n", "print(1)\n")
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", target_device="cuda"))
    assert outcome.verdict == "error" and "'cuda' for portable code" in outcome.reason


PACKAGE_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""

PROJECT_SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from mypkg.model import Net

torch.manual_seed(0)
device = "{device}"
data = TensorDataset(torch.randn(8, 4) * 2 - 1, torch.randint(0, 2, (8,)))
loader = DataLoader(data, batch_size=4, num_workers=2)
model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = {moved}, y.to(device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {{loss.item():.4f}}")
"""


@pytest.mark.slow  # two processes, about 7 s of CPU; bench/verify_public_scripts.py runs real projects
def test_a_project_script_imports_its_package_and_a_batch_left_on_the_cpu_is_located(tmp_path):
    """End to end (two processes): the script sits in a sub-folder and imports the tree's own
    package, loads data through DataLoader workers; the migrated copy forgot `x.to(device)`."""
    for name, device, moved in (("original", "cuda", "x.to(device)"), ("migrated", "npu", "x")):
        (tmp_path / name / "mypkg").mkdir(parents=True)
        (tmp_path / name / "mypkg" / "__init__.py").write_text("")
        (tmp_path / name / "mypkg" / "model.py").write_text(PACKAGE_MODEL)
        (tmp_path / name / "scripts").mkdir()
        (tmp_path / name / "scripts" / "train.py").write_text(PROJECT_SCRIPT.format(device=device, moved=moved))
    outcome = verify_script(ScriptOptions(tmp_path / "original", tmp_path / "migrated", "scripts/train.py",
                                          noise_run=False, timeout=120))
    assert outcome.verdict == "fail", outcome.reason
    assert "scripts/train.py:13" in outcome.sites()
    assert "the original moves a tensor [4, 4] to the device at scripts/train.py:13" in outcome.reason


CUDA_SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
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


@pytest.mark.slow  # apply, then two processes
def test_portable_code_runs_on_cpu_and_on_the_emulated_npu_with_the_same_numbers(tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "train.py").write_text(CUDA_SCRIPT)
    runner = CliRunner()
    applied = runner.invoke(cli_main, ["apply", str(tmp_path / "cuda"), "--target", "portable",
                                       "--output-dir", str(tmp_path / "portable")])
    assert applied.exit_code == 0, applied.output
    text = (tmp_path / "portable" / "train.py").read_text()
    assert "torch.accelerator" in text and "cuda" not in text.replace("torch.cuda", "")
    result = runner.invoke(cli_main, ["verify", "--portable", str(tmp_path / "portable"), "--format", "json",
                                      "--", "train.py"])
    assert result.exit_code == 0, result.output
    import json

    outcome = json.loads(result.output)["npu"]
    assert outcome["verdict"] == "pass" and outcome["matched_ops"] > 20
    assert outcome["reference"].startswith("cpu (plain torch") and outcome["target"].startswith("emulation")


def test_memory_findings_name_the_module_that_grew():
    from npu_migrate.verify.analysis import module_growth

    def side(dtype):
        return {"tensors": {"act/encoder#0/out": torch.zeros(8, 16), "act/encoder.fc#0/out": torch.zeros(8, 16),
                            "act/head#0/out": torch.zeros(8, 4, dtype=dtype), "param/head.weight": torch.zeros(4, 16),
                            "loss/step0": torch.zeros(())},
                "modules": {"head": {"class": "Linear", "file": "models.py", "line": 12}}}

    grew = module_growth(side(torch.float32), side(torch.float64))
    assert (grew["module"], grew["class"], grew["location"], grew["bytes"]) == ("head", "Linear", "models.py:12", 128)
    assert grew["text"] == "activations +128 B"
    assert module_growth(side(torch.float32), side(torch.float32)) is None

"""The opt-in insertions under `--target portable`: AMP with the file's device (off on the CPU,
which ran in full precision before) and pinned memory / non-blocking copies, which are
device-generic as they stand. The migrated script runs in this process on plain CPU torch and
gives the original's losses exactly."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

import pytest

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

TRAIN = '''\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def loader():
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 4, (32,)))
    return DataLoader(data, batch_size=8)


def train():
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader():
        x = x.to("cpu")
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"{loss.item():.8f}")


torch.manual_seed(1)
train()
'''


def _portable(dtype: str) -> str:
    rules = select_rules(all_rules(), enable=["NPU400", "NPU410"])
    outcome = migrate_text(TRAIN, "train.py", RuleSet(rules, {"target": "portable", "amp_dtype": dtype}))
    assert outcome.error is None and outcome.new_text is not None
    return outcome.new_text


@pytest.fixture(autouse=True)
def plain_cpu_torch(monkeypatch):
    """What plain CPU torch answers, whatever an in-process emulation test of this worker left
    behind (the emulation renames the PrivateUse1 backend to "npu", which torch cannot undo)."""
    import torch

    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *args, **kwargs: None)


def _losses(text: str) -> list[str]:
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(text, "train.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().split()


@pytest.mark.filterwarnings("ignore:.pin_memory. argument is set as true")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_insertions_are_device_generic_and_keep_a_cpu_run_exact(dtype):
    text = _portable(dtype)
    assert not re.search(r"torch_npu|\bnpu\b|\"npu\"|cuda", text), text
    assert f'torch.autocast(device_type=DEVICE.type, dtype=torch.{dtype}, enabled=DEVICE.type != "cpu")' in text
    assert ("scaler = torch.amp.GradScaler(DEVICE.type, enabled=DEVICE.type != \"cpu\")" in text) == (dtype == "float16")
    assert "DataLoader(data, batch_size=8, pin_memory=True)" in text
    assert _losses(text) == _losses(TRAIN)
    assert _portable(dtype) == text  # deterministic
    rules = select_rules(all_rules(), enable=["NPU400", "NPU410"])
    again = migrate_text(text, "train.py", RuleSet(rules, {"target": "portable", "amp_dtype": dtype}))
    assert again.new_text is None  # a second apply changes nothing


def test_memory_snapshot_hooks_use_the_devices_memory_module(tmp_path, monkeypatch):
    """Under emulation the hooks dump an npu snapshot (checked by hand and in docs/targets.md);
    here: the generic form, and a CPU run that records nothing and still runs."""
    rules = select_rules(all_rules(), enable=["NPU420"])
    outcome = migrate_text(TRAIN.replace("train()\n", 'if __name__ == "__main__":\n    train()\n'),
                           "train.py", RuleSet(rules, {"target": "portable"}))
    text = outcome.new_text
    assert text is not None and not re.search(r"torch_npu|torch\.npu|torch\.cuda", text), text
    assert 'and DEVICE.type in ("cuda", "npu"):' in text
    assert "torch.get_device_module(DEVICE).memory._record_memory_history(" in text
    snapshot = tmp_path / "snapshot.pickle"
    monkeypatch.setenv("NPU_MIGRATE_SNAPSHOT", str(snapshot))
    assert len(_losses(text)) == 4 and not snapshot.exists()

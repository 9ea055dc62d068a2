"""`npu-migrate verify` of a script against its tuned form: a fused optimizer on the emulated npu
zeroes gradients where the original drops them, so the tuned backward pass accumulates (`add_`)
where the original assigns. verify must not pair those with the original's optimizer updates of
the same shape (it did: "differs by 1.83" on pytorch/examples' MNIST)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from npu_migrate.verify.script import ScriptOptions, verify_script
from tests.rules.rule_cases import migrate

TRAIN = textwrap.dedent("""\
    import torch

    if __name__ == "__main__":
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step in range(4):
            x = torch.randn(5, 8).cuda()
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            print(f"loss {loss.item():.6f}")
    """)


def test_verify_passes_a_script_against_its_fused_optimizer(tmp_path: Path) -> None:
    tuned = migrate(TRAIN, ["NPU100", "NPU101", "NPU600"], "train.py").new_text
    assert tuned is not None and "NpuFusedSGD" in tuned and ".npu()" in tuned
    original, migrated = tmp_path / "original", tmp_path / "tuned"
    original.mkdir()
    migrated.mkdir()
    (original / "train.py").write_text(TRAIN)
    (migrated / "train.py").write_text(tuned)
    outcome = verify_script(ScriptOptions(original, migrated, "train.py", steps=3, memory=False,
                                          reference_store=None))
    assert outcome.verdict == "pass", outcome.reason

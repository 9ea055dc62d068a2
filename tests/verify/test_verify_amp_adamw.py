"""A bf16 AMP fine-tune with AdamW, MiniMind's shape in small (issue 27: MiniMind's LoRA fine-tune
failed verify original vs tuned): a gated SiLU MLP under `torch.autocast(dtype=torch.bfloat16)`,
hand-written RMSNorm, gradient clipping, a disabled GradScaler and AdamW's first steps. A clean
migration passes (its SiLU gradient is the CPU's kernel's, see tests/emulation); AdamW with another
lr, betas, eps or weight_decay fails, at the line that builds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_migrate.verify.script import ScriptOptions, verify_script

TRAIN = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps))).type_as(x)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, 4 * dim, bias=False)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Net(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim), Block(dim)])
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    data = torch.randint(0, 64, (8, 4, 48))
    for step in range(3):
        ids = data[step].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
'''

OPTIMIZER = "torch.optim.AdamW(model.parameters(), lr=5e-4)"
CASES = {"clean": OPTIMIZER,
         "lr": "torch.optim.AdamW(model.parameters(), lr=6e-4)",
         "betas": "torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.99))",
         "eps": "torch.optim.AdamW(model.parameters(), lr=5e-4, eps=1e-6)",
         "weight_decay": "torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.1)"}


def _tree(root: Path, device: str, optimizer: str = OPTIMIZER) -> Path:
    root.mkdir(parents=True)
    text = TRAIN.replace('"cuda"', f'"{device}"').replace(OPTIMIZER, optimizer)
    if device == "npu":
        text = text.replace("import torch\n", "import torch\nimport torch_npu\n", 1)
    (root / "train.py").write_text(text)
    return root


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("amp_adamw")
    original = _tree(tmp / "original", "cuda")
    cache: dict = {}
    return {name: verify_script(ScriptOptions(original, _tree(tmp / name, "npu", optimizer), "train.py", steps=2,
                                              timeout=300), cache)
            for name, optimizer in CASES.items()}


def test_a_clean_bf16_amp_adamw_migration_passes(outcomes):
    clean = outcomes["clean"]
    assert clean.verdict == "pass", clean.reason
    assert clean.data["amp"] is True and clean.data["steps_run"] == 2
    assert clean.comparison.matched > 500  # two steps' forward, backward and AdamW updates compared


@pytest.mark.parametrize("fault", [name for name in CASES if name != "clean"])
def test_an_adamw_hyperparameter_fault_is_found_at_its_line(outcomes, fault):
    outcome = outcomes[fault]
    assert outcome.verdict == "fail", outcome.reason
    assert "train.py:50" in outcome.sites(), (outcome.sites(), outcome.reason)

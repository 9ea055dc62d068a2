"""The tune family (NPU600-NPU629, issue 27): selection by family, each rewrite's version gate at
both sides of its boundary, and a tuned training script that runs under the emulation and
trains as the original does."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from codemods.api.registry import all_rules, select_rules
from codemods.api.targets import api_table
from tests.rules.rule_cases import migrate

REPO = Path(__file__).resolve().parents[2]

LLAMA_BLOCK = textwrap.dedent("""\
    import math
    import torch
    import torch.nn.functional as F


    class RMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight


    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)


    class Block(torch.nn.Module):
        def __init__(self, dim=16, heads=2):
            super().__init__()
            self.heads = heads
            self.norm = RMSNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.up = torch.nn.Linear(dim, 4 * dim)
            self.down = torch.nn.Linear(2 * dim, dim)

        def forward(self, x, cos, sin):
            b, s, d = x.shape
            h = self.norm(x)
            q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            q = (q * cos) + (rotate_half(q) * sin)
            k = (k * cos) + (rotate_half(k) * sin)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + y.transpose(1, 2).reshape(b, s, d)
            u = self.up(self.norm(x))
            a, g = u.chunk(2, dim=-1)
            return x + self.down(F.silu(a) * g)


    if __name__ == "__main__":
        torch.manual_seed(0)
        model = Block()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        data = torch.randn(10, 5, 16)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=4)
        angles = torch.arange(5)[:, None] * torch.ones(4)[None, :]
        cos, sin = torch.cat((angles, angles), -1).cos()[None, None], torch.cat((angles, angles), -1).sin()[None, None]
        for epoch in range(2):
            for (x,) in loader:
                optimizer.zero_grad()
                loss = model(x, cos, sin).pow(2).mean()
                loss.backward()
                optimizer.step()
                print(f"loss {loss.item():.6f}")
    """)

TUNE_CODES = ["NPU410", "NPU600", "NPU601", "NPU602", "NPU610", "NPU611", "NPU612", "NPU613", "NPU620", "NPU621"]


def test_enable_tune_selects_the_family_and_nothing_else() -> None:
    chosen = {r.code for r in select_rules(all_rules(), select=["NPU100"], enable=["tune"])}
    assert chosen == {"NPU100", *TUNE_CODES}
    assert not any(r.default for r in all_rules() if r.code in TUNE_CODES)


def _edits(src: str, code: str, version: str | None, path: str = "t.py") -> list[str]:
    options = {"target_version": version} if version else {}
    outcome = migrate(src, [code], path, options=options)
    return [e.code for e in outcome.edits if e.code == code]


def _below(since: str) -> str:
    major, minor = (int(p) for p in since.split("."))
    return f"{major}.{minor - 1}" if minor else f"{major - 1}.13"


GATED = [
    ("NPU600", "torch_npu.optim fused optimizers",
     "import torch\noptimizer = torch.optim.Adam(model.parameters())\nloss.backward()\n", "t.py"),
    ("NPU601", "torch_npu.npu.set_compile_mode",
     "import torch\nif __name__ == '__main__':\n    for x in loader:\n        model(torch.nonzero(x)).sum().backward()\n", "t.py"),
    ("NPU610", "torch_npu.npu_rms_norm", LLAMA_BLOCK, "t.py"),
    ("NPU611", "torch_npu.npu_rotary_mul", LLAMA_BLOCK, "t.py"),
    ("NPU612", "torch_npu.npu_swiglu", LLAMA_BLOCK, "t.py"),
    ("NPU613", "torch_npu.npu_fusion_attention", LLAMA_BLOCK, "t.py"),
    ("NPU620", "TASK_QUEUE_ENABLE=2", "python train.py\n", "run.sh"),
    ("NPU621", "TASK_QUEUE_ENABLE=2",
     "import torch\nif __name__ == '__main__':\n    for x in loader:\n        model(x).sum().backward()\n", "t.py"),
]


UNGATED = [  # device-generic arguments: no torch_npu release to wait for
    ("NPU602", "from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, batch_size=8)\n"),
    ("NPU410", "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
               "for x in loader:\n    x = x.to('npu')\n"),
]


@pytest.mark.parametrize(("code", "src"), UNGATED, ids=[g[0] for g in UNGATED])
def test_the_device_generic_rewrites_apply_at_the_oldest_release(code, src) -> None:
    oldest = min((row["since"] for row in api_table().values()), key=lambda v: tuple(int(p) for p in v.split(".")))
    assert _edits(src, code, oldest) and _edits(src, code, None), f"{code} must rewrite at any target-version"


@pytest.mark.parametrize(("code", "api", "src", "path"), GATED, ids=[g[0] for g in GATED])
def test_each_rewrite_is_gated_at_both_sides_of_its_boundary(code, api, src, path) -> None:
    since = api_table()[api]["since"]
    assert _edits(src, code, since, path), f"{code} must rewrite at target-version {since}"
    below = _below(since)
    outcome = migrate(src, [code], path, options={"target_version": below})
    if code in ("NPU620", "NPU621"):  # per variable: the older ones are still set, TASK_QUEUE_ENABLE is not
        assert "TASK_QUEUE_ENABLE" not in (outcome.new_text or "")
        assert any("TASK_QUEUE_ENABLE" in d.message for d in outcome.diagnostics)
        return
    assert outcome.new_text is None, f"{code} must not rewrite at target-version {below}"
    assert any(d.code == code and "target-version" in d.message for d in outcome.diagnostics)


def test_the_tuned_block_runs_under_the_emulation_and_trains_as_the_original(tmp_path) -> None:
    tuned = migrate(LLAMA_BLOCK, None, "train.py", enable=["tune"]).new_text
    assert tuned is not None
    for expected in ("torch_npu.optim.NpuFusedAdamW", "torch_npu.npu_rms_norm", "torch_npu.npu_rotary_mul",
                     "torch_npu.npu_swiglu", "torch_npu.npu_fusion_attention", "drop_last=True",
                     'os.environ.setdefault("TASK_QUEUE_ENABLE", "2")'):
        assert expected in tuned, expected
    (tmp_path / "orig.py").write_text(LLAMA_BLOCK)
    (tmp_path / "tuned.py").write_text(tuned)
    original = subprocess.run([sys.executable, "orig.py"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=True).stdout.split()
    emulated = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", "tuned.py"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=True, env=_env()).stdout.split()
    losses = [float(v) for v in original[1::2]]
    tuned_losses = [float(v) for v in emulated[1::2]]
    assert len(tuned_losses) == 4 and len(losses) == 6  # drop_last: 2 full batches of 4 per epoch, not 3
    for step in (0, 1):  # the first epoch's full batches are the same steps on both sides
        assert tuned_losses[step] == pytest.approx(losses[step], rel=1e-4)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_the_fused_optimizers_step_as_torch_does() -> None:
    """Bit for bit: the reference implementation computes torch.optim's formula in torch's order
    (single-tensor and foreach alike), so that `verify` sees what the combined buffers change and
    not an ulp of another order, which an Adam step turns into sign flips of near-zero gradients."""
    from npu_migrate import emulation

    pairs = [("NpuFusedAdamW", torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
             ("NpuFusedAdam", torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1, "amsgrad": True}),
             ("NpuFusedSGD", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
             ("NpuFusedAdadelta", torch.optim.Adadelta, {"weight_decay": 0.01}),
             ("NpuFusedRMSprop", torch.optim.RMSprop, {"lr": 1e-2, "momentum": 0.5, "centered": True})]
    with emulation.emulated():
        import torch_npu

        for name, reference, options in pairs:
            torch.manual_seed(0)
            ours = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
            theirs = copy.deepcopy(ours).to("npu")  # on the emulated device, as a tuned script has it
            steps = [(reference(ours.parameters(), foreach=True, **options), ours, "cpu"),
                     (getattr(torch_npu.optim, name)(theirs.parameters(), **options), theirs, "npu")]
            for _ in range(4):
                x = torch.randn(3, 6)
                for optimizer, model, device in steps:
                    optimizer.zero_grad()
                    model(x.to(device)).pow(2).mean().backward()
                    optimizer.step()
            for a, b in zip(ours.parameters(), theirs.parameters()):
                assert b.device.type == "npu" and torch.equal(a, b.cpu()), name
            with pytest.raises(ValueError):
                steps[1][0].zero_grad(set_to_none=True)


def test_a_module_zero_grad_leaves_the_fused_buffers_stale_as_on_the_device() -> None:
    """Why NPU600 refuses a file with `model.zero_grad()`: after the first step the new gradients
    are not the ones the fused optimizer reads."""
    from npu_migrate import emulation

    with emulation.emulated():
        import torch_npu

        model = torch.nn.Linear(3, 1)
        optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
        for _ in range(2):
            model.zero_grad()  # torch >= 2.0: gradients become None
            model(torch.ones(1, 3)).sum().backward()
            optimizer.step()
        fresh = model.weight.grad
        assert fresh is not None and fresh.data_ptr() != optimizer.combined[0][torch.float32]["grad"].data_ptr()


def test_the_fused_operators_follow_their_documented_constraints() -> None:
    from npu_migrate import emulation
    from npu_migrate.emulation import EmulationError

    with emulation.emulated():
        import torch_npu

        x = torch.randn(2, 3, 8, dtype=torch.bfloat16)
        y, rstd = torch_npu.npu_rms_norm(x, torch.ones(8), epsilon=1e-6)
        assert y.dtype == torch.bfloat16 and rstd.dtype == torch.float32  # the input's dtype, rstd float32
        with pytest.raises(EmulationError):
            torch_npu.npu_rotary_mul(torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 8))  # 2-D
        with pytest.raises(EmulationError):
            torch_npu.npu_swiglu(torch.randn(2, 5))
        q = torch.randn(1, 2, 4, 8)
        full = torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", scale=0.3)[0]
        plain = torch.softmax(q @ q.transpose(-2, -1) * 0.3, -1) @ q
        torch.testing.assert_close(full, plain)  # no atten_mask, sparse_mode 0: full attention
        with pytest.raises(EmulationError, match="needs atten_mask"):  # the causal modes take their mask
            torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", sparse_mode=2, scale=0.3)

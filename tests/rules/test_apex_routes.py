"""apex's fused layers and optimizers (NPU302, NPU304) rewritten to torch compute what apex's
documented formulas compute: reference implementations of them in plain torch (apex does not
install here) against the rewritten code on the emulated npu device, float32."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from tests.rules.rule_cases import migrate

REPO = Path(__file__).resolve().parents[2]


class FusedRMSNorm(torch.nn.Module):
    """apex.normalization.FusedRMSNorm: eps 1e-5 by default, weight named `weight`."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class FusedAdam(torch.optim.Optimizer):
    """apex.optimizers.FusedAdam's update (csrc/multi_tensor_adam.cu): bias-corrected moments;
    adam_w_mode=True decays the weight apart from the gradient, False adds it to the gradient."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, adam_w_mode=True,
                 weight_decay=0.0, amsgrad=False, set_grad_none=True):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.adam_w_mode = adam_w_mode

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (beta1, beta2), lr, eps, decay = group["betas"], group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["step"] += 1
                grad = p.grad if self.adam_w_mode else p.grad + decay * p
                state["m"].mul_(beta1).add_(grad, alpha=1 - beta1)
                state["v"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                m_hat = state["m"] / (1 - beta1 ** state["step"])
                v_hat = state["v"] / (1 - beta2 ** state["step"])
                update = m_hat / (v_hat.sqrt() + eps)
                if self.adam_w_mode:
                    update = update + decay * p
                p.sub_(lr * update)


PROGRAM = """\
from apex.normalization import FusedRMSNorm
from apex.optimizers import FusedAdam
def train(x):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), FusedRMSNorm(8)).to(x.device)
    optimizer = FusedAdam(model.parameters(), lr=1e-2, adam_w_mode={mode}, weight_decay=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        (model(x) - x.flip(0)).pow(2).mean().backward()  # no near-zero gradients, which Adam's step would blow up
        optimizer.step()
    return model(x)
"""


def _apex() -> dict[str, types.ModuleType]:
    apex, normalization, optimizers = (types.ModuleType(n) for n in ("apex", "apex.normalization", "apex.optimizers"))
    normalization.FusedRMSNorm, optimizers.FusedAdam = FusedRMSNorm, FusedAdam
    apex.normalization, apex.optimizers = normalization, optimizers
    return {"apex": apex, "apex.normalization": normalization, "apex.optimizers": optimizers}


def _train(src: str, x: torch.Tensor) -> torch.Tensor:
    namespace: dict[str, object] = {}
    exec(compile("import torch\n" + src, "<train>", "exec"), namespace)
    return namespace["train"](x)  # type: ignore[operator]


MAIN = """
if __name__ == "__main__":
    import json
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    print(json.dumps(train(x.to("npu")).cpu().tolist()))
"""


@pytest.mark.parametrize(("adam_w_mode", "optimizer"), [(True, "torch.optim.AdamW("), (False, "torch.optim.Adam(")])
def test_the_rewritten_layers_and_optimizer_train_as_apex_does(adam_w_mode: bool, optimizer: str, monkeypatch,
                                                               tmp_path) -> None:
    """The original runs here on CPU; the rewritten script under `python -m npu_migrate.emulation`
    (a process whose first backward pass runs on the npu device)."""
    program = PROGRAM.format(mode=adam_w_mode)
    rewritten = migrate(program, None, "train.py").new_text
    assert rewritten is not None and "apex" not in rewritten and "adam_w_mode" not in rewritten
    assert "torch.nn.RMSNorm(8, eps=1e-5)" in rewritten and optimizer in rewritten
    (tmp_path / "train.py").write_text("import torch\n" + rewritten + MAIN)
    ran = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", "train.py"], cwd=tmp_path, check=True,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    with monkeypatch.context() as patched:
        for name, module in _apex().items():
            patched.setitem(sys.modules, name, module)
        original = _train(program, torch.randn(4, 8, generator=torch.Generator().manual_seed(1)))
    torch.testing.assert_close(torch.tensor(json.loads(ran.stdout.splitlines()[-1])), original.detach(),
                               rtol=1e-5, atol=1e-5)

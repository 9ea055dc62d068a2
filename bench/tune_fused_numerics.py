"""How far each fused operator and optimizer the `tune` rules write lies from the unfused original
it replaces, as the emulation computes it (issue 27; figures in docs/tune.md).

    python bench/tune_fused_numerics.py [--seeds 5]

For each rewrite, the hand-written original and the emulation's reference implementation of the
fused op (`npu_migrate/emulation/fused_ops.py`) run on the same random inputs (a LLaMA-sized block:
batch 2, 8 heads of 64, 128 positions; a 3-layer MLP for the optimizers, 5 steps); printed: the
largest absolute and relative (to the largest |original|) difference over `--seeds` seeds, and the
output dtypes. These are the differences by design (dtype, order of the float32 operations), not
the device kernels' own accumulation order, which needs an Ascend device.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

from npu_migrate import emulation

Compare = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def cases(torch_npu: object) -> dict[str, Compare]:
    npu = torch_npu

    def rms(dtype: torch.dtype, cast_back: bool) -> Compare:
        def run(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
            torch.manual_seed(seed)
            x, weight = torch.randn(2, 128, 512).to(dtype), torch.rand(512) + 0.5
            normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
            # LLaMA: N(x).type_as(x) * W (float32 out for bf16 x); MiniMind: (W * N(x)).type_as(x)
            original = (weight * normed).type_as(x) if cast_back else normed.type_as(x) * weight
            return original, npu.npu_rms_norm(x, weight, epsilon=1e-6)[0]  # type: ignore[attr-defined]
        return run

    def rotary(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(seed)
        q = torch.randn(2, 8, 128, 64)
        angles = torch.arange(128)[:, None] * (1e4 ** (-torch.arange(32) / 32))[None, :]
        cos, sin = torch.cat((angles, angles), -1).cos()[None, None], torch.cat((angles, angles), -1).sin()[None, None]
        return q * cos + rotate_half(q) * sin, npu.npu_rotary_mul(q, cos, sin)  # type: ignore[attr-defined]

    def swiglu(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(seed)
        u = torch.randn(2, 128, 1024)
        a, b = u.chunk(2, dim=-1)
        return F.silu(a) * b, npu.npu_swiglu(u, dim=-1)  # type: ignore[attr-defined]

    def attention(dtype: torch.dtype) -> Compare:
        def run(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
            torch.manual_seed(seed)
            q, k, v = (torch.randn(2, 8, 128, 64).to(dtype) for _ in range(3))
            mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
            fused = npu.npu_fusion_attention(q, k, v, q.shape[1], "BNSD", atten_mask=mask,  # type: ignore[attr-defined]
                                             sparse_mode=2, scale=1.0 / math.sqrt(q.shape[-1]))[0]
            return F.scaled_dot_product_attention(q, k, v, is_causal=True), fused
        return run

    found: dict[str, Compare] = {
        "NPU610 npu_rms_norm, float32": rms(torch.float32, False),
        "NPU610 npu_rms_norm, bf16 input, N(x).type_as(x) * W": rms(torch.bfloat16, False),
        "NPU610 npu_rms_norm, bf16 input, (W * N(x)).type_as(x)": rms(torch.bfloat16, True),
        "NPU611 npu_rotary_mul, float32": rotary,
        "NPU612 npu_swiglu, float32": swiglu,
        "NPU613 npu_fusion_attention, float32, causal": attention(torch.float32),
        "NPU613 npu_fusion_attention, bf16, causal": attention(torch.bfloat16),
    }
    optimizers = [("NpuFusedAdamW", torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.1}),
                  ("NpuFusedAdam", torch.optim.Adam, {"lr": 1e-3, "weight_decay": 0.01}),
                  ("NpuFusedSGD", torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
                  ("NpuFusedAdadelta", torch.optim.Adadelta, {"lr": 1.0}),
                  ("NpuFusedRMSprop", torch.optim.RMSprop, {"lr": 1e-3, "momentum": 0.5, "centered": True})]
    for name, reference, options in optimizers:
        found[f"NPU600 {name}, 5 steps, parameters"] = optimizer_case(getattr(npu.optim, name), reference, options)  # type: ignore[attr-defined]
    return found


def optimizer_case(fused: type, reference: type, options: dict[str, object]) -> Compare:
    def run(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 128),
                                    torch.nn.GELU(), torch.nn.Linear(128, 10))
        twin = copy.deepcopy(model)
        pairs = [(reference(model.parameters(), **options), model), (fused(twin.parameters(), **options), twin)]
        for _ in range(5):
            x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
            for optimizer, net in pairs:
                optimizer.zero_grad()
                F.cross_entropy(net(x), y).backward()
                optimizer.step()
        flat = [torch.cat([p.detach().reshape(-1) for p in net.parameters()]) for net in (model, twin)]
        return flat[0], flat[1]
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print("| fused op (rule) | max abs difference | max rel difference | original dtype -> fused dtype |")
    print("|---|---|---|---|")
    with emulation.emulated():
        import torch_npu

        for label, compare in cases(torch_npu).items():
            worst_abs = worst_rel = 0.0
            dtypes = ""
            for seed in range(args.seeds):
                original, fused = compare(seed)
                difference = (original.double() - fused.double()).abs().max().item()
                worst_abs = max(worst_abs, difference)
                worst_rel = max(worst_rel, difference / original.double().abs().max().item())
                dtypes = f"{str(original.dtype).removeprefix('torch.')} -> {str(fused.dtype).removeprefix('torch.')}"
            print(f"| {label} | {worst_abs:.2e} | {worst_rel:.2e} | {dtypes} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-tensor comparison: the msprobe metric set and the pass rule."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from .thresholds import Thresholds


@dataclass
class Comparison:
    name: str
    shape: list[int]
    ref_dtype: str
    target_dtype: str
    cosine: float | None
    max_abs: float | None
    max_rel: float | None
    share_rel_1e3: float | None  # share of elements with relative error > 1/1000
    share_rel_5e3: float | None  # ... > 5/1000
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _as_float64(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach().to("cpu")
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.to(torch.float64)


def compare(name: str, ref: torch.Tensor, target: torch.Tensor, th: Thresholds) -> Comparison:
    ref_dtype, target_dtype = dtype_name(ref), dtype_name(target)
    if ref.shape != target.shape:
        return Comparison(name, list(ref.shape), ref_dtype, target_dtype, None, None, None, None, None,
                          False, f"shape {list(ref.shape)} -> {list(target.shape)}")
    r, t = _as_float64(ref), _as_float64(target)
    ref_finite, target_finite = torch.isfinite(r), torch.isfinite(t)
    new_nonfinite = int((~target_finite & ref_finite).sum())
    both = ref_finite & target_finite
    r, t = r[both], t[both]
    diff = (t - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / r.abs().clamp_min(max(th.abs_floor, 1e-30))
    max_rel = float(rel.max()) if rel.numel() else 0.0
    share_1e3 = float((rel > 1e-3).double().mean()) if rel.numel() else 0.0
    share_5e3 = float((rel > 5e-3).double().mean()) if rel.numel() else 0.0
    norms = float(r.norm()) * float(t.norm())
    cosine = _cosine(r, t, norms) if max_abs > th.abs_floor else 1.0
    reason = _verdict(ref_dtype, target_dtype, new_nonfinite, cosine, max_abs, share_5e3, th)
    return Comparison(name, list(ref.shape), ref_dtype, target_dtype, cosine, max_abs, max_rel,
                      share_1e3, share_5e3, reason == "", reason)


def _cosine(r: torch.Tensor, t: torch.Tensor, norms: float) -> float:
    return float((r * t).sum()) / norms if norms > 0 else 0.0


def _verdict(ref_dtype: str, target_dtype: str, new_nonfinite: int, cosine: float, max_abs: float,
             share_5e3: float, th: Thresholds) -> str:
    """Empty string when the pair passes, else the first rule it breaks."""
    if new_nonfinite:
        return f"{new_nonfinite} NaN/Inf where the reference is finite"
    if th.dtype_must_match and ref_dtype != target_dtype:
        return f"dtype {ref_dtype} -> {target_dtype}"
    if max_abs <= th.abs_floor:
        return ""
    if cosine < th.cosine_min and max_abs > th.max_abs_when_cosine_low:
        return f"cosine {cosine:.6f} < {th.cosine_min} and max abs {max_abs:.3g} > {th.max_abs_when_cosine_low}"
    if cosine < th.cosine_hard_min:
        return f"cosine {cosine:.6f} < {th.cosine_hard_min}"
    if max_abs > th.max_abs_hard:
        return f"max abs error {max_abs:.3g} > {th.max_abs_hard}"
    if th.max_share_rel_5e3 is not None and share_5e3 > th.max_share_rel_5e3:
        return f"{share_5e3:.1%} of elements beyond 5/1000 relative error > {th.max_share_rel_5e3:.1%}"
    return ""

"""The ANA finding codes: name, one-line summary and default severity of each, and a helper
to build a located Diagnostic. Every code has its page under docs/rules/."""

from __future__ import annotations

import ast

from npu_migrate.core.diagnostics import Diagnostic, Severity

INFO, WARNING = Severity.INFO, Severity.WARNING

CODES: dict[str, tuple[str, str, Severity]] = {
    "ANA001": ("cuda-automatic", "CUDA code that `npu-migrate apply` rewrites", INFO),
    "ANA002": ("cuda-manual", "CUDA code that needs a person: no rule rewrites it", WARNING),
    "ANA010": ("distributed-setup", "A distributed set-up and what changes for HCCL", INFO),
    "ANA020": ("third-party-cuda", "Custom or third-party CUDA code, with its NPU route", WARNING),
    "ANA030": ("cpu-fallback-risk", "An operator without an NPU kernel: it may fall back to the CPU", WARNING),
    "ANA031": ("fusion-opportunity", "Operators that a fused NPU API or torch.compile can serve in one kernel", INFO),
    "ANA032": ("amp-opportunity", "Training without mixed precision", INFO),
    "ANA040": ("dataloader-settings", "A DataLoader whose settings hold the NPU back", INFO),
    "ANA041": ("sync-in-loop", "A host synchronisation (.item(), .cpu(), .numpy(), .tolist()) in the training loop", WARNING),
    "ANA042": ("transfer-in-loop", "A blocking host-to-device copy in the training loop", INFO),
    "ANA043": ("device-round-trip", "A device -> host -> device round trip in one expression", WARNING),
    "ANA044": ("graph-leak", "A tensor that keeps its autograd graph is accumulated across steps", WARNING),
    "ANA045": ("checkpointing-opportunity", "Repeated blocks trained without gradient checkpointing", INFO),
    "ANA046": ("accumulation-opportunity", "The optimizer steps every iteration: no gradient accumulation", INFO),
    "ANA047": ("allocator-advice", "A pattern that calls for a PYTORCH_NPU_ALLOC_CONF setting", INFO),
}


def finding(code: str, path: str, where: ast.AST | tuple[int, int], message: str,
            severity: Severity | None = None) -> Diagnostic:
    line, col = (where.lineno, where.col_offset + 1) if isinstance(where, ast.AST) else where
    return Diagnostic(code, message, path, line, col, severity or CODES[code][2])


def sarif_rules() -> dict[str, tuple[str, str, str | None]]:
    """Rule metadata for npu_migrate.core.sarif.to_sarif."""
    return {code: (name, summary, None) for code, (name, summary, _) in CODES.items()}

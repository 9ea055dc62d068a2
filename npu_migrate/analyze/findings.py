"""The ANA finding codes: name, one-line summary and default severity of each, and a helper
to build a located Diagnostic. Every code has its page under docs/rules/."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from npu_migrate.core.diagnostics import Diagnostic, Severity

INFO, WARNING = Severity.INFO, Severity.WARNING

CODES: dict[str, tuple[str, str, Severity]] = {
    "ANA001": ("cuda-automatic", "CUDA code that `npu-migrate apply` rewrites", INFO),
    "ANA002": ("cuda-manual", "CUDA code that needs a person: no rule rewrites or reports it", WARNING),
    "ANA003": ("cuda-reported", "CUDA code that a rule reports with advice: a person applies it", WARNING),
    "ANA004": ("cuda-policy", "CUDA code a rule would handle, left by the rule selection", INFO),
    "ANA010": ("distributed-setup", "A distributed set-up and what changes for HCCL", INFO),
    "ANA020": ("third-party-cuda", "Custom or third-party CUDA code, with its NPU route", WARNING),
    "ANA030": ("cpu-fallback-risk", "An operator without an NPU kernel: it may fall back to the CPU", WARNING),
    "ANA031": ("fusion-opportunity", "Operators that a fused NPU API or torch.compile can serve in one kernel", INFO),
    "ANA032": ("amp-opportunity", "Training without mixed precision", INFO),
    "ANA033": ("loss-scaling", "Loss scaling that fp16 autocast needs, or that bf16 does not", INFO),
    "ANA034": ("tuning-computation", "Ascend tuning a `tune` rule applies: fused optimizer, fused operator, compile mode, launch environment", INFO),
    "ANA040": ("dataloader-settings", "A DataLoader whose settings hold the NPU back", INFO),
    "ANA041": ("sync-in-loop", "A host synchronisation (.item(), .cpu(), .numpy(), .tolist()) in the training loop", WARNING),
    "ANA042": ("transfer-in-loop", "A blocking host-to-device copy in the training loop", INFO),
    "ANA043": ("device-round-trip", "A device -> host -> device round trip in one expression", WARNING),
    "ANA044": ("graph-leak", "A tensor that keeps its autograd graph is accumulated across steps", WARNING),
    "ANA045": ("checkpointing-opportunity", "Repeated blocks trained without gradient checkpointing", INFO),
    "ANA046": ("accumulation-opportunity", "The optimizer steps every iteration: no gradient accumulation", INFO),
    "ANA047": ("allocator-advice", "A pattern that calls for a PYTORCH_NPU_ALLOC_CONF setting", INFO),
    "ANA048": ("redundant-transfer", "A device copy that repeats one already made", WARNING),
    "ANA049": ("tuning-memory", "Ascend tuning a `tune` rule applies: static shapes (drop_last), pinned non-blocking transfers", INFO),
}


CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True)
class Finding(Diagnostic):
    """A claim of `analyze` with what it saw (`evidence`: one short line per fact, each naming
    the source line it read) and how sure it is (`confidence`: high, medium or low)."""

    evidence: tuple[str, ...] = ()
    confidence: str = "high"


# what a finding can point at: a statement or an expression (they carry a position; `ast.AST` does not)
Located = ast.stmt | ast.expr


def finding(code: str, path: str, where: Located | tuple[int, int], message: str,
            severity: Severity | None = None, evidence: tuple[str, ...] | list[str] = (),
            confidence: str = "high") -> Finding:
    line, col = where if isinstance(where, tuple) else (where.lineno, where.col_offset + 1)
    return Finding(code, message, path, line, col, severity or CODES[code][2],
                   evidence=tuple(evidence), confidence=confidence)


def seen(label: str, lines: list[str], line: int) -> str:
    """One evidence line: what was seen, where, and the source text there (shortened)."""
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if len(text) > 90:
        text = text[:87] + "..."
    return f"{label}: line {line}" + (f" `{text}`" if text else "")


def sarif_rules() -> dict[str, tuple[str, str, str | None]]:
    """Rule metadata for npu_migrate.core.sarif.to_sarif."""
    return {code: (name, summary, None) for code, (name, summary, _) in CODES.items()}

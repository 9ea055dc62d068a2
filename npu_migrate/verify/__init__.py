"""`npu-migrate verify`: run the original and the migrated code side by side and compare numerics
and peak memory. See docs/verify.md.

The public names load on first use: importing `npu_migrate.verify.codes` (as `npu-migrate rules
VER001` does) must not import torch, which takes seconds."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {"Outcome": "analysis", "VerifyOptions": "core", "verify": "core", "verify_many": "core",
            "EntryError": "entry", "ThresholdPolicy": "thresholds"}

__all__ = ["EntryError", "Outcome", "ThresholdPolicy", "VerifyOptions", "verify", "verify_many"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)

"""`npu-migrate verify`: run the original and the migrated code side by side and compare numerics
and peak memory. See docs/verify.md."""

from __future__ import annotations

from .analysis import Outcome
from .core import VerifyOptions, verify, verify_many
from .entry import EntryError
from .thresholds import ThresholdPolicy

__all__ = ["EntryError", "Outcome", "ThresholdPolicy", "VerifyOptions", "verify", "verify_many"]

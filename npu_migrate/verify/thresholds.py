"""Pass-rule thresholds: msprobe's rule by default, dtype-aware and AMP-aware overrides
(thresholds.json), user overrides from `--threshold key=value` or a JSON file."""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from npu_migrate.core.tables import read_table
from npu_migrate.verify.data_tables import OVERRIDES, TABLES
_PRECISION_ORDER = ("float64", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Thresholds:
    cosine_min: float
    max_abs_when_cosine_low: float
    cosine_hard_min: float
    max_abs_hard: float
    abs_floor: float
    dtype_must_match: bool
    max_share_rel_5e3: float | None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class ThresholdPolicy:
    """Chooses the thresholds for one tensor pair."""

    default: dict[str, Any]
    by_dtype: dict[str, dict[str, Any]]
    amp: dict[str, Any]
    user: dict[str, Any]

    @classmethod
    def load(cls, overrides: dict[str, Any] | None = None, path: str | None = None) -> ThresholdPolicy:
        data = copy.deepcopy(TABLES.load("thresholds.json"))
        if path:  # DataError (a ValueError) names the file and the bad field
            extra = read_table(Path(path), OVERRIDES)
            for section in ("default", "amp"):
                data[section].update(extra.get(section, {}))
            for dtype, values in extra.get("by_dtype", {}).items():
                data["by_dtype"].setdefault(dtype, {}).update(values)
        policy = cls(data["default"], data["by_dtype"], data["amp"], dict(overrides or {}))
        known = {f.name for f in fields(Thresholds)}
        unknown = set(policy.user) - known
        if unknown:
            raise ValueError(f"unknown threshold(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        return policy

    def for_pair(self, ref_dtype: str, target_dtype: str, amp: bool) -> Thresholds:
        values = dict(self.default)
        lowest = max((d for d in (ref_dtype, target_dtype) if d in _PRECISION_ORDER),
                     key=_PRECISION_ORDER.index, default="float32")
        values.update(self.by_dtype.get(lowest, {}))
        if amp:
            values.update(self.amp)
        values.update(self.user)
        try:
            return Thresholds(**{f.name: _coerce(f.type, values[f.name]) for f in fields(Thresholds)})
        except (TypeError, ValueError) as error:
            raise ValueError(f"bad threshold value: {error}") from error


def _coerce(kind: Any, value: Any) -> Any:
    if value is None or str(value).lower() in ("none", "null", "off"):
        if "None" not in str(kind):
            raise ValueError(f"threshold value {value!r} cannot be disabled")
        return None
    if kind in (bool, "bool"):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
    return float(value)


def parse_overrides(items: tuple[str, ...] | list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--threshold {item!r}: expected key=value")
        result[key.strip()] = value.strip()
    return result


def parse_renames(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--rename old=new` pairs: a parameter or module path the migration renamed."""
    result: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"--rename {item!r}: expected OLD=NEW, e.g. --rename norm=rms_norm")
        result[old.strip()] = new.strip()
    return result


__all__ = ["ThresholdPolicy", "Thresholds", "parse_overrides", "parse_renames", "replace"]

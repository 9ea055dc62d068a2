"""Byte sizes: `8GiB`, `512MB`, `1.5 GiB`, `1000` (bytes) and back."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_size(text: str) -> int:
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (examples: 8GiB, 512MB, 1000000)")
    return int(float(match.group(1)) * _UNITS[unit])


def format_bytes(count: float) -> str:
    sign = "-" if count < 0 else ""
    count = abs(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{sign}{count:.0f} {unit}" if unit == "B" else f"{sign}{count:.2f} {unit}"
        count /= 1024
    return f"{sign}{count:.2f} GiB"

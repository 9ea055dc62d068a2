"""Small formatting helpers shared by the assessment's sections."""

from __future__ import annotations

MAX_LOCATIONS = 5


def where(path: str, line: int, col: int = 0) -> str:
    return f"{path}:{line}:{col}" if col else f"{path}:{line}"


def locations(items: list[tuple[str, int]], limit: int = MAX_LOCATIONS) -> str:
    shown = ", ".join(f"{p}:{line}" for p, line in items[:limit])
    return shown + (f", … (+{len(items) - limit})" if len(items) > limit else "")


def short_name(name: str) -> str:
    for prefix, short in (("torch.nn.functional.", "F."), ("torch.nn.", "nn.")):
        if name.startswith(prefix):
            return short + name[len(prefix):]
    return name

"""The rule data tables (`codemods/data/*.json`), loaded once per process."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data"


@functools.cache
def load_data(name: str) -> dict[str, Any]:
    """A data file of `codemods/data`, parsed once per process."""
    with open(DATA / name, encoding="utf-8") as handle:
        return json.load(handle)

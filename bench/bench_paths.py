"""Imported first by the bench scripts (`from bench_paths import ROOT`), before anything of ours.

A script run as `python bench/<name>.py` measures the checkout it sits in, not an installed copy:
the checkout goes first on sys.path, and with it the test helper folders whose modules the benches
share with the tests (tests/memory: the reference replay and the headless browser; tests/engine:
the process table)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

for folder in (ROOT / "tests" / "engine", ROOT / "tests" / "memory", ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

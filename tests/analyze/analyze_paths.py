"""Paths and helpers shared by the analyze tests (a module of its own: `conftest` names clash
between test folders)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "fixtures", "analyze_demo")
CPU_ONLY = os.path.join(REPO, "fixtures", "cpu_only")


def rel(path: str) -> str:
    return os.path.relpath(path, REPO).replace(os.sep, "/")

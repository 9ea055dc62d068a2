"""Suite-wide settings: property tests are deterministic by default, so the README's test
command gives the same result on every run and every machine.

- Hypothesis profile `ci` (the default): derandomized (the seed comes from each test's name),
  no example database (a failure once found is not replayed from `.hypothesis/` forever: keep it
  as an explicit `@example` instead), no deadline (a loaded machine is slow, not wrong).
- `NPU_MIGRATE_HYPOTHESIS=explore` picks random seeds and more examples, to hunt for new
  failures locally; what it finds becomes an `@example` regression case.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from npu_migrate.emulation._tensor import register_backend

# The emulated npu is registered with torch while the tests are collected, before any test runs:
# torch's autograd engine sizes its per-device queues once, at a process's first backward pass, so a
# test worker whose first backward came from a CPU model (any test file) could not run backward
# through npu tensors afterwards (activate() then raises EmulationError saying so; a test checks it
# in a fresh process).
register_backend()

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "explore", derandomize=False, deadline=None, max_examples=500,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NPU_MIGRATE_HYPOTHESIS", "ci"))


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): one worker per CPU this process may run on, at most 4.
    The CPUs the scheduler allows, not the machine's (a container limited to 2 CPUs on a big host
    gets 2), and a cap because every worker imports torch and runs subprocesses that do too."""
    override = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if override and override.isdigit():
        return int(override)
    return max(1, min(4, len(os.sched_getaffinity(0))))


# The longest test files (each runs on one worker: `--dist loadfile`), longest first. Started
# first, they end before the short files do, instead of one of them running alone at the end
# while the other worker idles. Only the order changes; a file missing here simply runs later.
LONGEST_FIRST = (
    "tests/verify/test_verify_script.py",
    "tests/verify/test_verify_runs.py",
    "tests/engine/test_determinism.py",
    "tests/verify/test_verify_model_mode.py",
    "tests/portable/test_portable_end_to_end.py",
    "tests/test_architecture.py",
    "tests/memory/test_html_browser.py",
    "tests/engine/test_signals.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = str(config.rootpath)
    items.sort(key=lambda item: rank.get(os.path.relpath(str(item.path), root), len(rank)))

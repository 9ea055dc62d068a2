"""The verify tests keep script mode's reference store in a temporary folder, never in the user's
cache (the CLI's default, store.default_root)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _reference_store(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NPU_MIGRATE_REFERENCE_STORE", str(tmp_path_factory.getbasetemp() / "reference-store"))

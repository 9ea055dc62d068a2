from __future__ import annotations

import pickle
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "snapshots"
REAL_FILES = sorted(SHARED.glob("*/*.p*")) if SHARED.is_dir() else []


def real_file_params():
    if not REAL_FILES:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"real snapshots not found at {SHARED} (../shared is absent)"))]
    return [pytest.param(p, id=p.name) for p in REAL_FILES]


@pytest.fixture
def write_pickle(tmp_path):
    def write(data, name="snap.pickle", protocol=pickle.HIGHEST_PROTOCOL):
        path = tmp_path / name
        with open(path, "wb") as handle:
            pickle.dump(data, handle, protocol=protocol)
        return path
    return write


def leak_demo(name: str) -> Path:
    path = SHARED / "npu" / name
    if not path.exists():
        pytest.skip(f"{path} not found (../shared is absent)")
    return path

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the torch_npu pickles ship with the tests (fixtures/snapshots/README.md); the two CUDA ones,
# without a stated licence, only in the workplace's ../shared
FIXTURES = REPO / "fixtures" / "snapshots"
SHARED = REPO.parent / "shared" / "snapshots"
REAL_FILES = sorted([*FIXTURES.glob("npu/*.pkl"), *(SHARED.glob("cuda/*.pickle") if SHARED.is_dir() else [])])


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
    path = FIXTURES / "npu" / name
    assert path.exists(), f"{path}: shipped with the tests, see fixtures/snapshots/README.md"
    return path

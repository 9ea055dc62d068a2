import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "fixtures", "analyze_demo")
CPU_ONLY = os.path.join(REPO, "fixtures", "cpu_only")


@pytest.fixture(scope="session")
def demo():
    from npu_migrate.analyze import analyze

    return analyze([DEMO], jobs=1)


def rel(path: str) -> str:
    return os.path.relpath(path, REPO).replace(os.sep, "/")

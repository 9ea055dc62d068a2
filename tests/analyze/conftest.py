import pytest
from analyze_paths import DEMO


@pytest.fixture(scope="session")
def demo():
    from npu_migrate.analyze import analyze

    return analyze([DEMO], jobs=1)

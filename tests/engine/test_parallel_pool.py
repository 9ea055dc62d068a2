"""The worker pool of a run ends cleanly when every result was taken, however the consumer stops."""

import gc

from npu_migrate.core import parallel


def _double(value: int) -> int:
    return 2 * value


def _ready() -> None:
    return None


def test_a_consumer_taking_exactly_its_results_ends_the_pool_without_killing_it():
    items = list(range(parallel.POOL_THRESHOLD + 8))
    abandoned = len(parallel.ABANDONED_POOLS)
    results = parallel.ordered_map(_double, _double, items, 2, _ready)
    taken = [next(results) for _ in items]  # as the apply runner does: never asks past the last
    del results
    gc.collect()
    assert taken == [2 * item for item in items]
    assert len(parallel.ABANDONED_POOLS) == abandoned  # a killed pool would be left here


def test_a_consumer_that_stops_early_still_stops_the_workers():
    items = list(range(parallel.POOL_THRESHOLD + 8))
    abandoned = len(parallel.ABANDONED_POOLS)
    results = parallel.ordered_map(_double, _double, items, 2, _ready)
    assert next(results) == 0
    results.close()
    assert len(parallel.ABANDONED_POOLS) == abandoned + 1
    parallel.ABANDONED_POOLS.pop()

import math

import pytest

from minformers.support.parallel import map_in_workers


def test_results_come_back_in_the_order_given_whatever_order_they_finish_in():
    seen = []
    results = map_in_workers(math.sqrt, [4.0, 81.0, 9.0], cost=lambda x: x,
                             on_result=lambda done, argument, result: seen.append((done, argument, result)))
    assert results == [2.0, 9.0, 3.0]
    assert [done for done, _, _ in seen] == [1, 2, 3]
    assert sorted(argument for _, argument, _ in seen) == [4.0, 9.0, 81.0]
    assert all(math.sqrt(argument) == result for _, argument, result in seen)


def test_workers_must_be_a_positive_count():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        map_in_workers(math.sqrt, [1.0], workers=0)


import math
import time

import pytest
import torch

from minformers.support.parallel import in_background, map_in_workers


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


def test_a_background_job_runs_beside_the_block_on_one_thread_each():
    with in_background(math.factorial, 6) as job:
        threads_inside = torch.get_num_threads()
        here = math.factorial(4)
    assert (here, job.get(), threads_inside) == (24, 720, 1)


def test_the_block_gets_its_threads_back_and_sees_the_jobs_error():
    torch.set_num_threads(2)
    with in_background(math.sqrt, -1.0) as job:
        pass
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="math domain error"):
        job.get()


def test_an_error_in_the_block_stops_the_job_instead_of_waiting_for_it():
    started = time.perf_counter()
    with pytest.raises(KeyError), in_background(time.sleep, 60):
        raise KeyError("interrupted")
    assert time.perf_counter() - started < 30  # the 60 s job was stopped, not awaited

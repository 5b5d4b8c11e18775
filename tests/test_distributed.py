"""Data, tensor and pipeline parallelism on two real gloo processes equal the single-process computation; ZeRO-1
halves each rank's optimizer state; the GPipe simulation's bubble is (p - 1) / (m + p - 1)."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minformers import distributed
from minformers.ddp_train import counting_batch, next_token_loss, run, tiny_gpt

MICROBATCH_COUNTS = [1, 2, 4]


def pipeline_parts(seed=0):
    torch.manual_seed(seed)
    stages = [nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16)) for _ in range(2)]
    return stages, torch.randn(8, 16), torch.randn(8, 16)


def mlp_parts(seed=0):
    torch.manual_seed(seed)
    return nn.Linear(12, 20), nn.Linear(20, 12), torch.randn(5, 12)


def every_experiment(rank, world_size):
    """One worker for the whole module: starting processes costs seconds, so all experiments share one launch."""
    model, batch = tiny_gpt(0), counting_batch(0, 8)
    stages, inputs, targets = pipeline_parts()
    return {
        "data_parallel": distributed.data_parallel_gradients(rank, world_size, model, batch, next_token_loss),
        "zero": distributed.zero_memory(rank, world_size, tiny_gpt(0), batch, next_token_loss),
        "tensor_parallel": distributed.tensor_parallel_outputs(rank, world_size, *mlp_parts()),
        "pipeline": distributed.gpipe_sweep(rank, world_size, stages, inputs, targets, MICROBATCH_COUNTS, 0.02),
    }


@pytest.fixture(scope="module")
def results():
    return distributed.launch(every_experiment)


def test_ddp_and_all_reduce_gradients_equal_single_process_gradients_on_the_whole_batch(results):
    reference = distributed.single_process_gradients(tiny_gpt(0), counting_batch(0, 8), next_token_loss)
    for rank_result in results:
        for kind in ("ddp", "all_reduce"):
            grads = rank_result["data_parallel"][kind]
            assert grads.keys() == reference.keys()
            for name, grad in reference.items():
                torch.testing.assert_close(grads[name], grad, atol=1e-6, rtol=1e-5, msg=f"{kind} {name}")


def test_zero_one_halves_optimizer_state_and_changes_no_update(results):
    for rank_result in results:
        zero = rank_result["zero"]
        ratio = zero["ZeRO-1"]["state_bytes"] / zero["AdamW"]["state_bytes"]
        assert 0.35 < ratio < 0.65
        for name, value in zero["AdamW"]["parameters"].items():
            torch.testing.assert_close(zero["ZeRO-1"]["parameters"][name], value, atol=1e-6, rtol=0)
    total = sum(r["zero"]["ZeRO-1"]["state_bytes"] for r in results)
    assert total == results[0]["zero"]["AdamW"]["state_bytes"]  # every parameter's state kept exactly once


def test_column_and_row_parallel_layers_equal_the_unsplit_layers_forward_and_backward(results):
    up, down, x = mlp_parts()
    x.requires_grad_()
    mlp = down(F.gelu(up(x)))
    mlp.sum().backward()
    hidden = up(x).detach()
    for rank, rank_result in enumerate(results):
        parallel = rank_result["tensor_parallel"]
        torch.testing.assert_close(parallel["column"], hidden, atol=1e-6, rtol=0)
        torch.testing.assert_close(parallel["row"], down(hidden).detach(), atol=1e-6, rtol=0)
        torch.testing.assert_close(parallel["mlp"], mlp.detach(), atol=1e-6, rtol=0)
        torch.testing.assert_close(parallel["x_grad"], x.grad, atol=1e-6, rtol=0)
        torch.testing.assert_close(parallel["up_grad"], up.weight.grad.chunk(2)[rank], atol=1e-6, rtol=0)
        torch.testing.assert_close(parallel["down_grad"], down.weight.grad.chunk(2, dim=1)[rank], atol=1e-6, rtol=0)


def test_pipeline_gradients_equal_the_whole_model_and_the_schedule_is_gpipes(results):
    stages, inputs, targets = pipeline_parts()
    F.mse_loss(nn.Sequential(*stages)(inputs), targets).backward()
    for m in MICROBATCH_COUNTS:
        for rank, stage in enumerate(stages):
            grads = results[rank]["pipeline"][m]["gradients"]
            for name, parameter in stage.named_parameters():
                torch.testing.assert_close(grads[name], parameter.grad, atol=1e-6, rtol=1e-5)
        events = results[0]["pipeline"][m]["events"] + results[1]["pipeline"][m]["events"]
        order = [(e[0], e[1], e[2]) for e in sorted(events, key=lambda e: e[3])]
        simulated = [(e[0], e[1], e[2]) for e in sorted(distributed.simulate_gpipe(2, m), key=lambda e: e[3])]
        assert sorted(order) == sorted(simulated)  # the same operations ran
        for stage in range(2):  # and each stage ran them in GPipe's order
            assert [o for o in order if o[0] == stage] == [o for o in simulated if o[0] == stage]
        assert distributed.bubble_fraction(events) >= distributed.gpipe_bubble(2, m) - 0.05


@pytest.mark.parametrize("stages, microbatches", [(1, 1), (2, 1), (2, 4), (4, 8), (8, 3), (4, 32)])
@pytest.mark.parametrize("backward_time", [1.0, 2.0])
def test_simulated_bubble_equals_the_formula(stages, microbatches, backward_time):
    events = distributed.simulate_gpipe(stages, microbatches, forward_time=1.0, backward_time=backward_time)
    assert len(events) == 2 * stages * microbatches
    assert distributed.bubble_fraction(events) == pytest.approx(distributed.gpipe_bubble(stages, microbatches))
    makespan = max(e[4] for e in events)
    assert makespan == pytest.approx((microbatches + stages - 1) * (1.0 + backward_time))


def test_simulation_respects_dependencies():
    events = {(e[0], e[1], e[2]): e for e in distributed.simulate_gpipe(3, 4)}
    for (stage, phase, micro), (_, _, _, start, _) in events.items():
        if phase == "F" and stage > 0:
            assert start >= events[stage - 1, "F", micro][4]
        if phase == "B" and stage < 2:
            assert start >= events[stage + 1, "B", micro][4]
        if phase == "B":
            assert start >= max(e[4] for key, e in events.items() if key[0] == stage and key[1] == "F")


def test_shard_and_bad_arguments():
    batch = torch.arange(12).view(6, 2)
    assert torch.equal(torch.cat([distributed.shard(batch, r, 3) for r in range(3)]), batch)
    with pytest.raises(ValueError, match="divisible by world_size=4"):
        distributed.shard(batch, 0, 4)
    with pytest.raises(ValueError, match="rank must be in"):
        distributed.shard(batch, 2, 2)
    with pytest.raises(ValueError, match="n_microbatches must be >= 1"):
        distributed.gpipe_bubble(2, 0)
    with pytest.raises(ValueError, match="out_features=5 must be divisible"):
        distributed.ColumnParallelLinear(nn.Linear(4, 5), 0, 2)
    with pytest.raises(ValueError, match="in_features=5 must be divisible"):
        distributed.RowParallelLinear(nn.Linear(5, 4), 0, 2)


@pytest.mark.slow
def test_train_loop_under_torchrun_with_ddp_gives_the_single_process_losses(tmp_path):
    output = tmp_path / "losses.json"
    torchrun = distributed.start_torchrun("minformers.ddp_train", "--steps", "6", "--output", str(output))
    assert distributed.torchrun_output(torchrun).startswith("2 process(es) | global batch 16 | losses ")
    two_processes = json.loads(output.read_text())
    assert two_processes["world_size"] == 2
    one_process = run(steps=6)
    assert two_processes["losses"] == pytest.approx(one_process, abs=1e-5)


def test_torchrun_output_raises_with_the_error_log_when_the_run_fails():
    torchrun = distributed.start_torchrun("minformers.ddp_train", "--dtype", "float16", processes=1)
    with pytest.raises(RuntimeError, match="invalid choice: 'float16'"):
        distributed.torchrun_output(torchrun)


def test_max_difference_is_the_largest_gap_over_every_named_tensor():
    ours = {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([0.0])}
    theirs = {"w": torch.tensor([[1.0, 2.5], [3.0, 4.0]]), "b": torch.tensor([-2.0])}
    assert distributed.max_difference(ours, theirs) == 2.0
    assert distributed.max_difference(ours, ours) == 0.0


def test_makespan_and_sweep_events_merge_the_ranks_timelines():
    # (stage, phase, micro-batch, start, end), as gpipe_worker records them
    sweep = [
        {1: {"events": [(0, "F", 0, 10.0, 11.0), (0, "B", 0, 13.0, 14.5)]}, 2: {"events": [(0, "F", 0, 0.0, 1.0)]}},
        {1: {"events": [(1, "F", 0, 11.0, 12.0), (1, "B", 0, 12.0, 13.0)]}, 2: {"events": [(1, "F", 0, 1.0, 2.0)]}},
    ]
    events = distributed.sweep_events(sweep)
    assert list(events) == [1, 2]
    assert events[1] == sweep[0][1]["events"] + sweep[1][1]["events"]
    assert distributed.makespan(events[1]) == 4.5
    assert distributed.makespan(events[2]) == 2.0
    # GPipe on 3 stages and 2 micro-batches takes (m + p - 1)(t_f + t_b) = 4 x 3 s
    assert distributed.makespan(distributed.simulate_gpipe(3, 2, 1.0, 2.0)) == 12.0

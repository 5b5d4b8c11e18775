"""`make bench` is not run by CI (it takes minutes and its numbers are the machine's), so these tests keep its
scripts working: each one imports, and the pieces that build models call the lib as it is now. A lib rename once
broke bench_gpt unnoticed for a session."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# A benchmark run as a script finds its neighbours (bench_gpt_reference imports bench_gpt's timing helpers).
sys.path.insert(0, str(BENCHMARKS))


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("bench_*.py")), ids=lambda path: path.stem)
def test_each_benchmark_imports_and_has_a_main(path):
    assert callable(load(path.stem).main)


def test_bench_gpt_builds_both_models_and_times_a_step_of_each():
    bench = load("bench_gpt")
    from minformers.convert.gpt2 import hf_gpt2_config, hf_gpt2_state_dict
    from minformers.gpt import GPT, GPTConfig

    config = GPTConfig.tiny(vocab_size=84)
    ours = GPT(config).train()
    theirs = bench.transformers.GPT2LMHeadModel(hf_gpt2_config(config)).train()
    theirs.load_state_dict(hf_gpt2_state_dict(ours), strict=False)
    # the same weights, so the two steps time the same computation; 1e-4, not the parity tests' 1e-5: this only
    # checks that the benchmark wires both models alike (test_convert holds the exact parity)
    with torch.no_grad():
        ids = torch.randint(0, 84, (2, 16))
        torch.testing.assert_close(theirs(ids).logits, ours(ids), atol=1e-4, rtol=1e-4)
    ours_seconds, theirs_seconds = bench.taking_turns(
        [bench.training_step(ours, ours), bench.training_step(theirs, lambda ids: theirs(ids).logits)], rounds=1
    )
    assert ours_seconds > 0 and theirs_seconds > 0
    assert bench.step_flops(config, 12) > 0


def test_plain_gpt_has_our_parameters_and_computes_our_function():
    bench = load("bench_gpt_reference")
    from minformers.gpt import GPT, GPTConfig, language_model_loss

    for activation in bench.ACTIVATIONS:
        config = GPTConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=24, max_len=8, dropout=0.0,
                           activation=activation)
        ours, plain = GPT(config), bench.PlainGPT(config)
        assert sum(p.numel() for p in plain.parameters()) == sum(p.numel() for p in ours.parameters())
        bench.copy_weights(ours, plain)
        ids = torch.randint(0, 11, (3, 8))
        loss = language_model_loss(plain(ids), ids)
        torch.testing.assert_close(loss, language_model_loss(ours(ids), ids))
        loss.backward()
        assert all(parameter.grad is not None for parameter in plain.parameters())


def test_bench_threads_step_builders_make_a_loss_that_backpropagates():
    bench = load("bench_threads")
    for build in (bench.gpt_step, bench.bert_step, bench.llama_step, bench.encoder_decoder_step,
                  bench.sibling_llama_step, lambda: bench.sweep_gpt_step(32)):
        model, loss = build()
        loss().backward()
        assert any(parameter.grad is not None for parameter in model.parameters())

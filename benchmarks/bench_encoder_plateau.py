"""What took the shared encoder off the unigram plateau? The ablation behind bert_pretraining.ENCODER_RUN.

Three pretraining runs of the same tiny BERT on the same news corpus for the same number of steps, each scored on
the same held-out blocks (ENCODER_RUN's validation batch) at its [MASK] positions, against the unigram floor there:
- the course's recipe: 16-token blocks, 256 a step, for the first share of the steps ENCODER_RUN sets (its
  short_fraction), then 32-token blocks, 128 a step;
- long blocks only: 32-token blocks, 128 a step, throughout (the same tokens per step);
- half as many blocks: the course's schedule at half the batch (128, then 64, blocks a step).

The runs go to two one-thread worker processes and are checkpointed like the book's (the first is the book's own run,
loaded if a build has trained it). About 10 minutes from scratch.

    .venv/bin/python benchmarks/bench_encoder_plateau.py
"""

import contextlib
import dataclasses
import io

from minformers.bert import IGNORE_INDEX
from minformers.recipes.bert_pretraining import ENCODER_RUN, news_corpus, pretrain_tiny_bert
from minformers.support.parallel import map_in_workers

VARIANTS = {
    "the course's recipe (short blocks, then long)": {},
    "long blocks only, same tokens a step": {"short_fraction": 0.0},
    "the course's schedule, half the blocks a step": {"batch_size": ENCODER_RUN.batch_size // 2},
}


def mask_loss_curve(changes: dict) -> tuple[list[int], list[float]]:
    """Train the variant (or load it) and return its evaluation steps and its held-out loss at [MASK] at each.
    Every variant scores ENCODER_RUN's validation batch: it depends only on the validation size, which they share."""
    with contextlib.redirect_stdout(io.StringIO()):
        _, history = pretrain_tiny_bert(news_corpus(), dataclasses.replace(ENCODER_RUN, **changes), progress=False)
    return history.eval_steps, history.eval["val_mask_loss"]


def main() -> None:
    corpus = news_corpus()
    validation = ENCODER_RUN.validation_batch(corpus)
    predicted = validation.mlm_labels != IGNORE_INDEX
    at_mask = validation.input_ids[predicted] == corpus.tokenizer.special_ids["mask"]
    floor = -ENCODER_RUN.token_log_frequencies(corpus)[validation.mlm_labels[predicted][at_mask]].mean().item()
    results = map_in_workers(mask_loss_curve, list(VARIANTS.values()), workers=2)
    print(f"held-out loss at [MASK] minus the unigram floor there ({floor:.3f} nats); negative is better")
    steps = results[0][0]
    print(f"{'run':<48}" + "".join(f"{step:>8}" for step in steps[1::2]))
    for name, (_, curve) in zip(VARIANTS, results, strict=True):
        print(f"{name:<48}" + "".join(f"{loss - floor:>+8.3f}" for loss in curve[1::2]))
    finals = {name: curve[-1] - floor for name, (_, curve) in zip(VARIANTS, results, strict=True)}
    recipe = finals.pop(next(iter(VARIANTS)))
    for name, gap in finals.items():
        print(f"final gap, the course's recipe against '{name}': {recipe:+.3f} vs {gap:+.3f} nats")

if __name__ == "__main__":
    main()

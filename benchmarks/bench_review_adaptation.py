"""Can the shared encoder's pretraining be made to pay on review sentiment? The measurement behind bert_finetuning's
finding that the pretrained tiny BERT does not beat the same network from scratch.

bert_finetuning fine-tunes the shared encoder (ENCODER_RUN, BBC news) and the same network from random weights on the
movie-review sentences with a mean head, over 3 seeds, and the pretrained body comes out behind. Two ways it might be
made to pay, each over the page's seeds, scored on the whole dev split and set against the control fine-tuned for as
long (statistics.compare_over_seeds: a seed interval and McNemar's test per seed):
- fine-tune longer: 300 steps, not the page's 80;
- adapt the body to the reviews first, as Gururangan et al. (2020) adapt RoBERTa to a task's own unlabelled text:
  masked language modelling on the training split's sentences, without their labels, for 200 or 600 steps of 128
  sentences, then the page's 80 fine-tuning steps.

The fine-tunes go to two one-thread worker processes. About 6 minutes once the shared encoder is trained.

    .venv/bin/python benchmarks/bench_review_adaptation.py
"""

import copy
import random
from dataclasses import replace

import torch

from minformers.bert import BertModel
from minformers.objectives import SentencePair
from minformers.recipes.bert_classifier import EncoderFineTuneRun, fine_tune_encoder_on_reviews
from minformers.recipes.bert_pretraining import ENCODER_RUN, pretraining_batch, shared_encoder
from minformers.recipes.news import news_corpus
from minformers.support import data
from minformers.support.parallel import map_in_workers
from minformers.support.runtime import seed_everything
from minformers.support.statistics import compare_over_seeds
from minformers.train import TrainConfig, train

SEEDS = (1, 2, 3)
PAGE_STEPS, LONG_STEPS = 80, 300  # fine-tuning steps: the page's, and longer
ADAPTATION_STEPS = (200, 600)
ADAPTATION_BATCH = 128  # review sentences a step, each padded to at most the encoder's 32 tokens


def adapted_body(steps: int) -> BertModel:
    """The shared encoder after ``steps`` more steps of masked language modelling (its own masking, at the
    fine-tuning rate) on the training split's review sentences, labels unused."""
    corpus = news_corpus()
    tokenizer = corpus.tokenizer
    cls, sep = tokenizer.special_ids["cls"], tokenizer.special_ids["sep"]
    sentences = [
        [cls, *tokenizer.encode(text)[: corpus.max_len - 2], sep] for text, _ in data.movie_review_splits()["train"]
    ]
    examples = [SentencePair(ids, [0] * len(ids), is_next=True) for ids in sentences]

    def batch_for_step(step: int):
        generator = random.Random(step)
        drawn = [examples[generator.randrange(len(examples))] for _ in range(ADAPTATION_BATCH)]
        return pretraining_batch(tokenizer, drawn, torch.Generator().manual_seed(step))

    model = copy.deepcopy(shared_encoder())
    schedule = TrainConfig(steps=steps, lr=EncoderFineTuneRun().schedule.lr, warmup_steps=steps // 10)
    train(model, batch_for_step, ENCODER_RUN.losses, schedule, progress=False)
    return model.bert.eval()


def fine_tune(job: tuple[EncoderFineTuneRun, BertModel | None]):
    run, body = job
    return fine_tune_encoder_on_reviews(run, body).dev_correct


def main() -> None:
    seed_everything(0)  # the book's threads for the adaptation runs; the workers take one each
    bodies = {f"pretrained, then {steps} MLM steps on the reviews": adapted_body(steps) for steps in ADAPTATION_STEPS}
    schedule = EncoderFineTuneRun().schedule
    # name -> (fine-tuning steps, pretrained, body), and the control each is compared with
    arms = {
        f"from scratch, {PAGE_STEPS} steps": (PAGE_STEPS, False, None),
        f"pretrained, {PAGE_STEPS} steps": (PAGE_STEPS, True, None),
        **{f"{name}, {PAGE_STEPS} steps": (PAGE_STEPS, True, body) for name, body in bodies.items()},
        f"from scratch, {LONG_STEPS} steps": (LONG_STEPS, False, None),
        f"pretrained, {LONG_STEPS} steps": (LONG_STEPS, True, None),
    }
    jobs = [
        (
            EncoderFineTuneRun(
                pretrained,
                seed,
                "mean",
                schedule=replace(schedule, steps=steps, warmup_steps=steps // 10, eval_every=steps),
            ),
            body,
        )
        for steps, pretrained, body in arms.values()
        for seed in SEEDS
    ]
    verdicts = map_in_workers(fine_tune, jobs, workers=2)
    by_arm = {name: verdicts[i * len(SEEDS) : (i + 1) * len(SEEDS)] for i, name in enumerate(arms)}
    print(f"dev accuracy, mean of seeds {SEEDS}, mean head; each against the control fine-tuned as long")
    for name, (steps, pretrained, _) in arms.items():
        accuracy = sum(v.float().mean().item() for v in by_arm[name]) / len(SEEDS)
        line = f"{name:<58} {accuracy:6.1%}"
        if pretrained:
            control = by_arm[f"from scratch, {steps} steps"]
            line += f"   minus from scratch: {compare_over_seeds(by_arm[name], control).describe()}"
        print(line)


if __name__ == "__main__":
    main()

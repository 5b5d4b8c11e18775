"""Pretraining a tiny BERT on BBC news: one recipe that the BERT page runs and explains,
and that the fine-tuning page starts from.

This is the whole recipe of the course's shared encoder, used by nine pages: batches,
masking, the MLM, NSP and ELECTRA losses, and the run that trains or loads it.

    corpus = news_corpus()  # NSP pairs and a 3,000-piece vocabulary (recipes.news)
    model, history = pretrain_tiny_bert(corpus)  # trained, or loaded from a checkpoint

A batch pads the pairs and masks them afresh:

    >>> from minformers.recipes.news import SPECIALS
    >>> tokenizer = WordPieceTokenizer([*SPECIALS, "news", "today", "rain"])
    >>> pair = SentencePair(
    ...     input_ids=[2, 5, 3, 6, 7, 3], segment_ids=[0, 0, 0, 1, 1, 1], is_next=1
    ... )
    >>> generator = torch.Generator().manual_seed(0)
    >>> batch = pretraining_batch(tokenizer, [pair] * 4, generator)
    >>> # is_next=1 becomes NSP label 0, as in BERT
    >>> batch.input_ids.shape, batch.nsp_labels.tolist()
    (torch.Size([4, 6]), [0, 0, 0, 0])
    >>> # [CLS] and [SEP] are never chosen
    >>> bool((batch.mlm_labels[:, [0, 2, 5]] == -100).all())
    True

The recipe is sized for one CPU core: 2 layers, 128 channels, a 3,000-piece vocabulary
trained on the articles, pairs of at most 32 pieces. ``pretrain_tiny_bert`` saves a
checkpoint named by everything that shapes the run, so a second page of the same build
(or a second call) loads the model instead of training it again.
"""

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from minformers.bert import IGNORE_INDEX, BertConfig, BertForPreTraining
from minformers.electra import Electra, electra_forward
from minformers.finetuning import sentiment_probe
from minformers.objectives import (
    SentencePair,
    contiguous_blocks,
    mask_tokens,
    pad,
    sentence_order_pairs,
)
from minformers.recipes.news import NewsCorpus, news_corpus
from minformers.support.arguments import require_size
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.train import TrainConfig, train
from minformers.wordpiece import WordPieceTokenizer


@dataclass
class PretrainingBatch:
    input_ids: torch.Tensor  # (B, T), after masking
    # (B, T), 0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    segment_ids: torch.Tensor
    attention_mask: torch.Tensor  # (B, T), 1 on real tokens
    # (B, T), the original id where a token was chosen for MLM, -100 elsewhere
    mlm_labels: torch.Tensor
    # (B,), 0 = B follows A, 1 = B is random (BERT's and HF's convention)
    nsp_labels: torch.Tensor
    # seeds whatever the loss itself draws at random (ELECTRA's sampled replacements)
    seed: int = 0

    def rows(self, index: torch.Tensor, seed: int = 0) -> "PretrainingBatch":
        """The examples at ``index``, masks included: a static-masking run draws its
        batches this way."""
        tensors = (
            self.input_ids,
            self.segment_ids,
            self.attention_mask,
            self.mlm_labels,
            self.nsp_labels,
        )
        return PretrainingBatch(*(tensor[index] for tensor in tensors), seed=seed)


def pretraining_batch(
    tokenizer: WordPieceTokenizer,
    pairs: list[SentencePair],
    generator: torch.Generator,
    mask_rate: float = 0.15,
    mask_split: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> PretrainingBatch:
    """Pad the pairs and mask them afresh: a pair drawn twice gets two different masks
    (dynamic masking). Each ordinary token is chosen with probability ``mask_rate``, and
    a chosen one becomes [MASK], a random token or stays itself in the shares
    ``mask_split`` (``objectives.mask_tokens``' p and split)."""
    pad_id = tokenizer.special_ids["pad"]
    input_ids, attention_mask = pad([pair.input_ids for pair in pairs], pad_id)
    segment_ids, _ = pad([pair.segment_ids for pair in pairs], 0, input_ids.shape[1])
    nsp_labels = torch.tensor([0 if pair.is_next else 1 for pair in pairs])
    # [PAD] [UNK] [CLS] [SEP] [MASK]: never chosen for MLM
    special_ids = list(tokenizer.special_ids.values())
    masked, mlm_labels = mask_tokens(
        input_ids,
        tokenizer.vocab_size,
        tokenizer.special_ids["mask"],
        special_ids,
        p=mask_rate,
        split=mask_split,
        generator=generator,
    )
    return PretrainingBatch(masked, segment_ids, attention_mask, mlm_labels, nsp_labels)


def masking_shares(
    mask_rate: float, mask_split: tuple[float, float, float], n_ordinary: int
) -> dict[str, float]:
    """What masking does to the ordinary tokens, in expectation: the share of them the
    model must predict, and how the predicted ones look in its input. A random
    replacement is drawn from the ``n_ordinary`` ordinary ids, so it is the original
    token one time in ``n_ordinary``, and the model then sees the true token, as when it
    is kept.

    >>> shares = masking_shares(0.15, (0.8, 0.1, 0.1), n_ordinary=2)
    >>> {role: round(share, 4) for role, share in shares.items()}
    {'predicted': 0.15, 'shown [MASK]': 0.12, 'shown a wrong token': 0.0075,
     'shown the true token': 0.0225}
    """
    # the same checks as a run's settings
    run = PretrainingRun(mask_rate=mask_rate, mask_split=mask_split)
    require_size("n_ordinary", n_ordinary)
    p, (mask, random_share, keep) = run.mask_rate, run.mask_split
    return {
        "predicted": p,
        "shown [MASK]": p * mask,
        "shown a wrong token": p * random_share * (1 - 1 / n_ordinary),
        "shown the true token": p * (keep + random_share / n_ordinary),
    }


@torch.no_grad()
def masked_position_losses(
    model: BertForPreTraining, batch: PretrainingBatch
) -> torch.Tensor:
    """(N,): the MLM loss in nats at each of the batch's N predicted positions, in
    row-major order. Two models scored on the same masks can then be compared position
    by position: their difference varies far less than either loss, because the same
    positions are hard for both.

    >>> from minformers.recipes.news import SPECIALS
    >>> tokenizer = WordPieceTokenizer([*SPECIALS, "news", "today", "rain"])
    >>> pair = SentencePair([2, 5, 6, 7, 5, 3], segment_ids=[0] * 6, is_next=1)
    >>> generator = torch.Generator().manual_seed(0)
    >>> batch = pretraining_batch(tokenizer, [pair] * 8, generator, mask_rate=0.5)
    >>> _ = torch.manual_seed(0)
    >>> model = BertForPreTraining(BertConfig.tiny(vocab_size=8))
    >>> losses = masked_position_losses(model, batch)
    >>> len(losses) == int((batch.mlm_labels != -100).sum())
    True
    >>> mean_loss = prediction_scores(model, batch, tokenizer)["all predicted"]["loss"]
    >>> round(losses.mean().item() - mean_loss, 6)
    0.0
    """
    model.eval()
    predicted = batch.mlm_labels != IGNORE_INDEX  # (B, T)
    # (B, T, C)
    hidden = model.bert(
        batch.input_ids, batch.segment_ids, batch.attention_mask
    ).hidden_states
    logits = model.mlm_head(hidden[predicted])  # (N, V)
    return F.cross_entropy(logits, batch.mlm_labels[predicted], reduction="none")


@torch.no_grad()
def prediction_scores(
    model: BertForPreTraining, batch: PretrainingBatch, tokenizer
) -> dict[str, dict[str, float]]:
    """The MLM head's mean loss (nats) and accuracy at the batch's predicted positions,
    grouped by what the model saw there: "[MASK]", "a wrong token" (a random
    replacement), "the true token" (kept, or a random draw that hit the original), and
    "all predicted"; and "unmasked": the same positions with the text fed unmasked, as a
    fine-tuned model reads it, so that the right answer is the token in the input. Each
    group also gives its "count" of positions (a group with none has NaN loss and
    accuracy).

    >>> from minformers.recipes.news import SPECIALS
    >>> tokenizer = WordPieceTokenizer([*SPECIALS, "news", "today", "rain"])
    >>> pair = SentencePair([2, 5, 6, 7, 5, 3], segment_ids=[0] * 6, is_next=1)
    >>> generator = torch.Generator().manual_seed(0)
    >>> batch = pretraining_batch(tokenizer, [pair] * 8, generator, mask_rate=0.5)
    >>> _ = torch.manual_seed(0)
    >>> model = BertForPreTraining(BertConfig.tiny(vocab_size=8))
    >>> scores = prediction_scores(model, batch, tokenizer)
    >>> predicted = int((batch.mlm_labels != -100).sum())
    >>> scores["all predicted"]["count"] == scores["unmasked"]["count"] == predicted
    True
    >>> groups = ("[MASK]", "a wrong token", "the true token")
    >>> scores["all predicted"]["count"] == sum(scores[g]["count"] for g in groups)
    True
    """
    model.eval()
    predicted = batch.mlm_labels != IGNORE_INDEX  # (B, T)
    # (B, T), the text before masking
    original = torch.where(predicted, batch.mlm_labels, batch.input_ids)
    # (N,) each, in row-major order
    targets, shown = original[predicted], batch.input_ids[predicted]

    def logits_at_predicted(input_ids: torch.Tensor) -> torch.Tensor:
        # (B, T, C)
        hidden = model.bert(
            input_ids, batch.segment_ids, batch.attention_mask
        ).hidden_states
        # (N, V): only the positions scored, not all B x T
        return model.mlm_head(hidden[predicted])

    def scores(logits: torch.Tensor, where: torch.Tensor) -> dict[str, float]:
        if not where.any():
            return {"loss": float("nan"), "accuracy": float("nan"), "count": 0}
        return {
            "loss": F.cross_entropy(logits[where], targets[where]).item(),
            "accuracy": (logits[where].argmax(-1) == targets[where])
            .float()
            .mean()
            .item(),
            "count": int(where.sum()),
        }

    masked, unmasked = (
        logits_at_predicted(batch.input_ids),
        logits_at_predicted(original),
    )
    shown_mask, shown_true = shown == tokenizer.special_ids["mask"], shown == targets
    everywhere = torch.ones_like(shown_mask)
    groups = {
        "[MASK]": shown_mask,
        "a wrong token": ~shown_mask & ~shown_true,
        "the true token": shown_true,
        "all predicted": everywhere,
    }
    return {name: scores(masked, where) for name, where in groups.items()} | {
        "unmasked": scores(unmasked, everywhere)
    }


def pretraining_losses(
    model: BertForPreTraining, batch: PretrainingBatch, nsp: bool = True
) -> dict[str, torch.Tensor]:
    """L = L_MLM + L_NSP, optimised as "loss"; the two parts and the accuracies are
    returned for the record. ``nsp=False`` (RoBERTa) optimises L_MLM alone."""
    output = model(
        batch.input_ids,
        batch.segment_ids,
        batch.attention_mask,
        mlm_labels=batch.mlm_labels,
        nsp_labels=batch.nsp_labels if nsp else None,
    )
    # (N,), in the order of output.mlm_logits
    targets = batch.mlm_labels[batch.mlm_labels != IGNORE_INDEX]
    metrics = {
        "loss": output.loss,
        "mlm_loss": output.mlm_loss,
        "mlm_accuracy": (output.mlm_logits.argmax(-1) == targets).float().mean(),
    }
    if nsp:
        metrics |= {
            "nsp_loss": output.nsp_loss,
            "nsp_accuracy": (output.nsp_logits.argmax(-1) == batch.nsp_labels)
            .float()
            .mean(),
        }
    return metrics


def electra_losses(
    model: Electra, batch: PretrainingBatch, rtd_weight: float
) -> dict[str, torch.Tensor]:
    """ELECTRA's L_MLM(generator) + rtd_weight * L_RTD(discriminator), with the
    generator's samples drawn from a generator seeded by ``batch.seed``; also the
    generator's MLM accuracy, how often the discriminator is right, and the share of
    tokens replaced."""
    output = electra_forward(
        model,
        batch.input_ids,
        batch.mlm_labels,
        batch.segment_ids,
        batch.attention_mask,
        rtd_weight,
        torch.Generator().manual_seed(batch.seed),
    )
    real = batch.attention_mask.bool()
    correct = (output.rtd_logits > 0).float() == output.rtd_labels
    targets = batch.mlm_labels[batch.mlm_labels != IGNORE_INDEX]
    return {
        "loss": output.loss,
        "mlm_loss": output.mlm_loss,
        "mlm_accuracy": (output.mlm_logits.argmax(-1) == targets).float().mean(),
        "rtd_loss": output.rtd_loss,
        "rtd_accuracy": correct[real].float().mean(),
        "replaced": output.rtd_labels[real].mean(),
    }


def unigram_log_frequencies(
    sequences: list[list[int]], vocab_size: int, special_ids: list[int]
) -> torch.Tensor:
    """(V,) log p(token) over the ordinary tokens of ``sequences``, add-0.5 smoothed so
    that an unseen token is unlikely rather than impossible. Special tokens count as
    unseen: MLM never asks for them.

    An untrained MLM head gives every token about the same logit, so its loss starts
    near log V; before the model can use the context it must first learn that "the" is
    common, and with a 3,000-piece vocabulary that alone takes a tiny model hundreds of
    steps. Starting the head's bias here hands it that knowledge, the unigram loss, at
    step 0.

    >>> logp = unigram_log_frequencies(
    ...     [[2, 5, 5, 6, 3]], vocab_size=7, special_ids=[0, 1, 2, 3, 4]
    ... )
    >>> # counts + 0.5: 0.5 x 5 specials, 2.5, 1.5, over 6.5
    >>> [round(p, 3) for p in logp.exp().tolist()]
    [0.077, 0.077, 0.077, 0.077, 0.077, 0.385, 0.231]
    """
    require_size("vocab_size", vocab_size)
    tokens = torch.tensor(
        [token for sequence in sequences for token in sequence], dtype=torch.long
    )
    counts = torch.bincount(tokens, minlength=vocab_size).double()
    counts[special_ids] = 0
    counts += 0.5
    return (counts / counts.sum()).log().float()


@dataclass(frozen=True)
class PretrainingRun:
    """What one pretraining run is: the objective, the model's shape, the data, the
    schedule and the validation set.

    The defaults are the BERT page's run (MLM + NSP on sentence pairs); ``roberta()``
    and ``electra()`` give the variants as settings of the same recipe.
    """

    schedule: TrainConfig = TrainConfig(
        steps=360, lr=2e-3, warmup_steps=36, eval_every=90
    )
    # examples per step, each freshly masked; small, to buy more steps for the compute
    batch_size: int = 16
    # validation examples, masked once with a fixed seed: every evaluation sees the same
    validation_size: int = 256
    # BertConfig.tiny overrides, e.g. (("n_layers", 4),)
    model_changes: tuple[tuple[str, object], ...] = ()
    # "nsp": next-sentence prediction on sentence pairs (BERT); "sop": sentence-order
    # prediction (ALBERT); "none": no sentence task, the input is contiguous text cut
    # into full blocks (RoBERTa, ELECTRA)
    sentence_task: str = "nsp"
    # "dynamic": a new mask each time an example is drawn; "static": one mask per
    # example, drawn once
    masking: str = "dynamic"
    # train on only the first this many examples (to see several epochs); None: all
    train_size: int | None = None
    # with "none": the first short_fraction of the steps use blocks short_len long, as
    # many more per batch as keeps the tokens per step equal, as BERT trained on 128
    # tokens before 512
    short_len: int | None = None
    short_fraction: float = 0.0
    # "mlm": BertForPreTraining; "electra": replaced-token detection, minformers.electra
    objective: str = "mlm"
    rtd_weight: float = 50.0  # ELECTRA's lambda on the discriminator's loss
    # > 0: every evaluation also fits a sentiment probe on this many reviews and
    # logs its "probe_accuracy"
    probe_size: int = 0
    # share of ordinary tokens chosen for prediction (BERT's 15%), in training
    # and validation alike
    mask_rate: float = 0.15
    # a chosen token's (mask, random, keep) shares, BERT's by default
    mask_split: tuple[float, float, float] = (0.8, 0.1, 0.1)
    # "unigram": the MLM decoder's bias starts at the log frequencies of the training
    # tokens, so the first steps need not spend themselves learning how common each
    # token is (BERT and HF start it at 0: "zeros")
    output_bias: str = "unigram"
    # "scratch": seed 0's random weights; "shared": the encoder (an ELECTRA run's
    # discriminator) starts from the course's shared encoder, ENCODER_RUN's result, so
    # the run continues that pretraining with another objective
    start: str = "scratch"
    # the draw of each step's examples, masks (and ELECTRA's replacements): 0 is the
    # course's; another value gives another run of the same recipe, to measure how much
    # a result depends on that luck
    data_seed: int = 0

    def __post_init__(self):
        require_size("batch_size", self.batch_size)
        require_size("data_seed", self.data_seed, minimum=0)
        require_size("validation_size", self.validation_size)
        choices = {
            "sentence_task": ("nsp", "sop", "none"),
            "masking": ("dynamic", "static"),
            "objective": ("mlm", "electra"),
            "output_bias": ("unigram", "zeros"),
            "start": ("scratch", "shared"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        if self.train_size is not None:
            require_size("train_size", self.train_size)
        require_size("probe_size", self.probe_size, minimum=0)
        if not 0.0 < self.mask_rate < 1.0:  # written this way round, NaN fails too
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate}")
        if not isinstance(self.mask_split, tuple | list):
            raise TypeError(
                "mask_split must be a tuple (mask, random, keep), got "
                f"{type(self.mask_split).__name__}"
            )
        # a list (say from JSON) becomes a tuple
        object.__setattr__(self, "mask_split", tuple(self.mask_split))
        split = self.mask_split
        if (
            len(split) != 3
            or not all(share >= 0 for share in split)
            or abs(sum(split) - 1.0) > 1e-6
        ):
            raise ValueError(
                "mask_split must be three shares (mask, random, keep), each >= 0, "
                f"summing to 1, got {split}"
            )
        if not 0.0 <= self.short_fraction < 1.0:
            raise ValueError(
                f"short_fraction must be in [0, 1), got {self.short_fraction}"
            )
        schedulable = (
            self.short_len is not None
            and self.sentence_task == "none"
            and self.masking == "dynamic"
        )
        if self.short_fraction and not schedulable:
            raise ValueError(
                "short_fraction needs short_len, sentence_task='none' and dynamic "
                "masking"
            )
        if self.objective == "electra" and self.sentence_task != "none":
            raise ValueError("ELECTRA has no sentence task: use sentence_task='none'")

    @classmethod
    def roberta(cls, **changes) -> "PretrainingRun":
        """RoBERTa's recipe at our scale: MLM alone, no NSP, on full blocks of
        contiguous text, masked dynamically."""
        return cls(**{"sentence_task": "none", "masking": "dynamic", **changes})

    @classmethod
    def electra(cls, **changes) -> "PretrainingRun":
        """ELECTRA: a generator a quarter as wide, and the discriminator this run's
        BertConfig.tiny, on RoBERTa's blocks."""
        return cls(**{"sentence_task": "none", "objective": "electra", **changes})

    def examples(
        self, corpus: NewsCorpus, split: str, length: int | None = None
    ) -> list[SentencePair]:
        """The ``split`` ("train" or "validation") examples: the corpus's NSP pairs,
        sentence-order pairs made from them with a fixed seed ("sop"), or contiguous
        blocks of ``length`` (default: the corpus's max_len) tokens as one-segment
        examples ("none"; their is_next is never used)."""
        if split not in ("train", "validation"):
            raise ValueError(f"split must be 'train' or 'validation', got {split!r}")
        if self.sentence_task == "none":
            documents = (
                corpus.train_documents
                if split == "train"
                else corpus.validation_documents
            )
            special = corpus.tokenizer.special_ids
            blocks = contiguous_blocks(
                documents, length or corpus.max_len, special["cls"], special["sep"]
            )
            return [
                SentencePair(block, [0] * len(block), is_next=1) for block in blocks
            ]
        pairs = corpus.train_pairs if split == "train" else corpus.validation_pairs
        return (
            pairs
            if self.sentence_task == "nsp"
            else sentence_order_pairs(pairs, random.Random(0))
        )

    def config(self, corpus: NewsCorpus) -> BertConfig:
        return BertConfig.tiny(
            vocab_size=corpus.tokenizer.vocab_size,
            max_len=corpus.max_len,
            **dict(self.model_changes),
        )

    def model(self, corpus: NewsCorpus) -> BertForPreTraining | Electra:
        """The model before training, from seed 0: the same initial weights whatever ran
        before in the session. With ``start="shared"`` its encoder (and an MLM run's
        heads) are the shared encoder's instead. A head that starts untrained with
        ``output_bias="unigram"`` (an ELECTRA run's generator's) predicts token
        frequencies (``unigram_log_frequencies``)."""
        torch.manual_seed(0)
        model = (
            Electra(self.config(corpus))
            if self.objective == "electra"
            else BertForPreTraining(self.config(corpus))
        )
        if self.start == "shared":
            if corpus is not news_corpus() or self.model_changes:
                raise ValueError(
                    "start='shared' continues the shared encoder: use news_corpus() "
                    "and no model_changes"
                )
            shared = shared_encoder()
            if self.objective == "mlm":
                model.load_state_dict(shared.state_dict())
                return model
            # the embeddings are the generator's too
            model.bert.load_state_dict(shared.bert.state_dict())
        if self.output_bias == "unigram":
            mlm = model.generator if self.objective == "electra" else model
            with torch.no_grad():
                mlm.mlm_head.decoder.bias.copy_(self.token_log_frequencies(corpus))
        return model

    def token_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        """(V,) log frequencies of the ordinary tokens in this run's training examples
        (``unigram_log_frequencies``): where the unigram output bias starts, and the
        floor of a prediction that reads no context."""
        examples = self.examples(corpus, "train")[: self.train_size]
        return unigram_log_frequencies(
            [example.input_ids for example in examples],
            corpus.tokenizer.vocab_size,
            list(corpus.tokenizer.special_ids.values()),
        )

    def validation_batch(
        self, corpus: NewsCorpus, size: int | None = None
    ) -> PretrainingBatch:
        """The first ``size`` (default ``validation_size``) held-out examples, masked
        once at this run's rate and split with a fixed seed: what every evaluation of
        the run scores, the same whenever it is asked for."""
        examples = self.examples(corpus, "validation")[
            : require_size("size", size or self.validation_size)
        ]
        return pretraining_batch(
            corpus.tokenizer,
            examples,
            torch.Generator().manual_seed(12345),
            self.mask_rate,
            self.mask_split,
        )

    def losses(self, model, batch: PretrainingBatch) -> dict[str, torch.Tensor]:
        if self.objective == "electra":
            return electra_losses(model, batch, self.rtd_weight)
        return pretraining_losses(model, batch, nsp=self.sentence_task != "none")

    def static_masks(self, corpus: NewsCorpus) -> PretrainingBatch:
        """Every training example (the first ``train_size``) masked once, with a fixed
        seed: what a static-masking run draws its batches from, each draw of an example
        seeing the same mask."""
        examples = self.examples(corpus, "train")[: self.train_size]
        return pretraining_batch(
            corpus.tokenizer,
            examples,
            torch.Generator().manual_seed(54321),
            self.mask_rate,
            self.mask_split,
        )

    def batches(self, corpus: NewsCorpus) -> Callable[[int], PretrainingBatch]:
        """``batch_for_step(step)``: the step's examples, drawn and (dynamically) masked
        with a generator seeded by the step, so a run is reproducible and resumes
        exactly."""
        examples = self.examples(corpus, "train")[: self.train_size]
        tokenizer = corpus.tokenizer
        masked_once = self.static_masks(corpus) if self.masking == "static" else None
        short_steps = round(self.short_fraction * self.schedule.steps)
        short = (
            self.examples(corpus, "train", self.short_len)[: self.train_size]
            if short_steps
            else []
        )
        # equal tokens per step
        short_batch = (
            self.batch_size * corpus.max_len // (self.short_len or corpus.max_len)
        )

        def batch_for_step(step: int) -> PretrainingBatch:
            # data_seed 0: the step itself. Not data_seed << 32: torch's CPU generator
            # keeps a seed's low 32 bits
            seed = step + 1_000_003 * self.data_seed
            generator = torch.Generator().manual_seed(seed)
            pool, size = (
                (short, short_batch)
                if step < short_steps
                else (examples, self.batch_size)
            )
            chosen = torch.randint(len(pool), (size,), generator=generator)
            if masked_once is not None:
                return masked_once.rows(chosen, seed=seed)
            batch = pretraining_batch(
                tokenizer,
                [pool[i] for i in chosen.tolist()],
                generator,
                self.mask_rate,
                self.mask_split,
            )
            batch.seed = seed
            return batch

        return batch_for_step


# The course's shared encoder: pretrained once per build by the encoder-pretraining
# page, loaded by the encoder pages after it. RoBERTa's recipe (MLM alone on contiguous
# blocks, masked afresh at every draw) with BERT's schedule of short blocks first:
# 16-token blocks for the first 60% of the steps, 256 of them a step, then the corpus's
# 32-token blocks, 128 a step, so every step reads 4,096 tokens. Without the short
# blocks first the model stays near the unigram floor at [MASK] for this many steps;
# benchmarks/bench_encoder_plateau.py measures the schedules against each other. The
# step count is the least at which pretraining_probes' noun agreement clears chance.
ENCODER_RUN = PretrainingRun.roberta(
    schedule=TrainConfig(steps=1200, lr=2e-3, warmup_steps=100, eval_every=150),
    batch_size=128,
    short_len=16,
    short_fraction=0.6,
    validation_size=512,
)


def pretrain_tiny_bert(
    corpus: NewsCorpus,
    run: PretrainingRun = PretrainingRun(),
    progress: bool | None = None,
) -> tuple[BertForPreTraining | Electra, History]:
    """Pretrain ``BertConfig.tiny`` as ``run`` says (MLM + NSP by default) on
    ``corpus``; return the model (in eval mode) and its History.

    The batch for step s is drawn and masked with a generator seeded by s, so the run is
    reproducible and resumes exactly from its checkpoint. Training metrics are those of
    ``run.losses`` ("loss", "mlm_loss", "mlm_accuracy", and "nsp_loss" and
    "nsp_accuracy" with a sentence task; ELECTRA's are listed in ``electra_losses``);
    evaluation metrics are the same names prefixed with "val_" (on validation examples
    masked as the run masks, at its ``mask_rate`` and ``mask_split``); for MLM, also
    "val_mask_loss" and "val_shown_loss", the MLM loss where the model saw [MASK] and
    where it saw the true token (``prediction_scores``); and "probe_accuracy" with
    ``run.probe_size`` (``finetuning.sentiment_probe``: movie-review sentiment from the
    frozen encoder). An ELECTRA run returns an ``electra.Electra``, whose ``.bert`` is
    the discriminator's encoder.
    """
    validation = run.validation_batch(corpus)

    probe = (
        sentiment_probe(corpus.tokenizer, corpus.max_len, run.probe_size)
        if run.probe_size
        else None
    )

    def evaluate(model) -> dict[str, torch.Tensor]:
        scores = {
            f"val_{name}": value
            for name, value in run.losses(model, validation).items()
        }
        if run.objective == "mlm":
            seen = prediction_scores(model, validation, corpus.tokenizer)
            scores |= {
                "val_mask_loss": seen["[MASK]"]["loss"],
                "val_shown_loss": seen["the true token"]["loss"],
            }
        return scores | ({"probe_accuracy": probe(model)} if probe else {})

    model = run.model(corpus)
    settings = {
        "run": asdict(run),
        "config": asdict(run.config(corpus)),
        "vocab": corpus.tokenizer.id_to_token,
        "articles": len(corpus.articles),
        "train_pairs": len(corpus.train_pairs),
    }
    history = train(
        model,
        run.batches(corpus),
        run.losses,
        run.schedule,
        evaluate=evaluate,
        checkpoint=checkpoint_path("bert-tiny-news", settings),
        progress=progress,
    )
    return model.eval(), history


def shared_encoder() -> BertForPreTraining:
    """The course's shared encoder, ``ENCODER_RUN`` on ``news_corpus()``, in eval mode:
    loaded from this build's checkpoint, which the encoder-pretraining page writes
    (trained here, with progress, if no page has yet)."""
    return pretrain_tiny_bert(news_corpus(), ENCODER_RUN)[0]

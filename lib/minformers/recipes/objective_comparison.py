"""Four pretraining objectives on one corpus, one body size and one compute budget, then
one downstream test.

Over 350 lines: four objectives on one corpus at equal compute (bodies, batches, losses,
FLOP counts), kept in one place so that they stay comparable.

- **causal LM** (GPT): every position predicts the next token, reading only the
  tokens to its left;
- **MLM** (BERT, here RoBERTa's recipe): 15% of the tokens are masked and predicted
  from both sides;
- **span corruption** (T5): spans covering 15% of the tokens become sentinels, and a
  decoder writes them out;
- **RTD** (ELECTRA): a small generator fills the masked positions, and the body says
  for every token whether it was replaced.

Each is a ``PretrainingObjective`` (``CausalLM``, ``MaskedLM``, ``SpanCorruption``,
``ReplacedTokenDetection``); an ``ObjectiveRun`` names one and holds its settings.

Every run reads the same contiguous 32-token blocks of the BBC articles
(``news.news_corpus``), the blocks that step s of ``PretrainingRun.roberta()`` draws,
and every body has the shape of ``BertConfig.tiny``: 2 post-LN layers, 128 wide, 2
heads, a 512-wide feed-forward, GELU, no dropout. MLM and RTD are the BERT pages'
``PretrainingRun`` recipes; causal LM trains our ``GPT`` and span corruption our
``EncoderDecoder`` with those sizes. Compute is matched by FLOPs, not steps: each
objective's training step is counted with ``measure.training_flops``, and each run gets
the steps its share of the budget buys (``equal_compute_steps``).

    >>> equal_compute_steps({"MLM": 1.4e9, "causal LM": 2.4e9}, budget=1.4e9 * 120)
    {'MLM': 120, 'causal LM': 70}

Each objective's own held-out loss is set against its *no-context floor*, the loss of a
predictor that reads nothing of the input and answers the targets' frequencies
(``ObjectiveRun.held_out_nats``): what a run has learned from context is how far it is
below that floor.

What a downstream task reads is a *body*: called as ``body(ids, attention_mask=mask)``
it returns an object whose ``hidden_states`` are (B, T, C), as ``BertModel`` does;
``finetuning.sentence_features`` and ``MeanPooledClassifier`` read any of the four that
way. GPT's body gives its causal states (each position has read only what is left of
it); T5's gives its encoder's output.
"""

import copy
import math
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bert import BertConfig
from minformers.denoising import random_noise_mask, sentinel_corruption
from minformers.electra import electra_forward
from minformers.encoder_decoder import (
    PAD,
    EncoderDecoder,
    TransformerConfig,
    sequence_loss,
)
from minformers.gpt import GPT, GPTConfig
from minformers.objectives import IGNORE_INDEX, pad
from minformers.recipes.bert_pretraining import (
    PretrainingBatch,
    PretrainingRun,
    unigram_log_frequencies,
)
from minformers.recipes.news import NewsCorpus
from minformers.similarity import mean_pool
from minformers.support.arguments import require_size
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.support.measure import training_flops
from minformers.train import TrainConfig, train


def equal_compute_steps(
    flops_per_step: dict[str, float], budget: float
) -> dict[str, int]:
    """The number of training steps each run can take within ``budget`` FLOPs: budget /
    FLOPs per step, rounded to the nearest whole step, so every run's total lands within
    half a step of the budget.

    >>> equal_compute_steps({"cheap": 1.0e9, "dear": 3.0e9}, budget=3.0e11)
    {'cheap': 300, 'dear': 100}
    """
    if not budget > 0:
        raise ValueError(f"budget must be > 0 FLOPs, got {budget}")
    steps = {}
    for name, flops in flops_per_step.items():
        if not flops > 0:
            raise ValueError(f"flops_per_step[{name!r}] must be > 0, got {flops}")
        steps[name] = round(budget / flops)
        if steps[name] < 1:
            raise ValueError(
                f"budget={budget:.3g} FLOPs buys {name!r} less than one step of "
                f"{flops:.3g} FLOPs"
            )
    return steps


@dataclass
class BodyOutput:
    hidden_states: torch.Tensor  # (B, T, C)


class CausalBody(nn.Module):
    """GPT's blocks read as an encoder: position t's last hidden state has seen tokens
    0..t only. Right padding changes no real position's state, so no attention mask is
    needed."""

    def __init__(self, gpt: GPT):
        super().__init__()
        self.gpt = gpt
        self.config = gpt.config

    def forward(self, input_ids, segment_ids=None, attention_mask=None) -> BodyOutput:
        return BodyOutput(self.gpt.hidden_states(input_ids))  # (B, T) -> (B, T, C)


class EncoderBody(nn.Module):
    """An encoder-decoder's encoder, the part T5's fine-tuning for classification would
    keep reading (the decoder is held but never called). Padding is found from the ids
    ([PAD] = 0)."""

    def __init__(self, model: EncoderDecoder):
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(self, input_ids, segment_ids=None, attention_mask=None) -> BodyOutput:
        return BodyOutput(self.model.encode(input_ids)[0])  # (B, S) -> (B, S, C)


class MeanPooledClassifier(nn.Module):
    """A copy of a body, its hidden states averaged over the real tokens, and Linear(C,
    n_classes): the same head on every body, so fine-tuning compares bodies and not
    heads. The body given is left unchanged.

    >>> body = BertConfig.tiny(vocab_size=50)
    >>> from minformers.bert import BertModel
    >>> classifier = MeanPooledClassifier(BertModel(body))
    >>> classifier(torch.tensor([[2, 7, 3, 0]]), torch.tensor([[1, 1, 1, 0]])).shape
    torch.Size([1, 2])
    """

    def __init__(self, body: nn.Module, n_classes: int = 2):
        super().__init__()
        self.body = copy.deepcopy(body)
        self.classifier = nn.Linear(
            body.config.d_model, require_size("n_classes", n_classes, minimum=2)
        )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        # (B, T, C)
        hidden = self.body(input_ids, attention_mask=attention_mask).hidden_states
        # (B, C) -> (B, n_classes)
        return self.classifier(mean_pool(hidden, attention_mask))


def gpt_config(body: BertConfig) -> GPTConfig:
    """A GPT of the body's shape: GPT-1's post-LN layout (no final LayerNorm), BERT's
    GELU and LayerNorm epsilon."""
    return GPTConfig(
        vocab_size=body.vocab_size,
        d_model=body.d_model,
        n_layers=body.n_layers,
        n_heads=body.n_heads,
        d_ff=body.d_ff,
        max_len=body.max_len,
        dropout=body.dropout,
        norm_first=False,
        activation=body.activation,
        layer_norm_eps=body.layer_norm_eps,
    )


def t5_config(body: BertConfig, n_sentinels: int) -> TransformerConfig:
    """An encoder-decoder whose encoder has the body's shape and whose decoder has as
    many layers; the vocabulary gains ``n_sentinels`` sentinel ids after the body's, and
    one table serves encoder, decoder and output."""
    vocab_size = body.vocab_size + n_sentinels
    return TransformerConfig(
        source_vocab_size=vocab_size,
        target_vocab_size=vocab_size,
        d_model=body.d_model,
        n_heads=body.n_heads,
        n_encoder_layers=body.n_layers,
        n_decoder_layers=body.n_layers,
        d_ff=body.d_ff,
        max_len=body.max_len,
        dropout=body.dropout,
        norm_first=False,
        share_embeddings=True,
        activation=body.activation,
        layer_norm_eps=body.layer_norm_eps,
    )


@dataclass(frozen=True)
class ObjectiveRun:
    """One objective trained for ``steps`` steps of ``batch_size`` blocks, with the BERT
    pages' schedule shape (peak ``lr`` after 10% warmup, then cosine decay).

    The run holds the settings, which name its checkpoint; what differs from one
    objective to the next (its model, batches, losses and floors) is the code of its
    ``PretrainingObjective``, to which ``model``, ``body``, ``batch``, ``losses``,
    ``supervised_positions``, ``body_parameters``, ``floor_log_frequencies`` and
    ``held_out_nats`` hand over.

    >>> run = ObjectiveRun("span corruption")
    >>> type(run.pretraining_objective).__name__, run.schedule.warmup_steps
    ('SpanCorruption', 10)
    """

    objective: str  # one of OBJECTIVES
    steps: int = 100
    # the BERT pages' rate, used for every objective (none was tuned separately)
    lr: float = 2e-3
    # blocks per step: the same blocks, step by step, for every objective
    batch_size: int = 16
    validation_size: int = 256  # held-out blocks, corrupted once with a fixed seed
    # span corruption's sentinel ids (a 32-token block has one or two spans)
    n_sentinels: int = 8
    # span corruption: the share of tokens hidden (T5's 15%)
    noise_density: float = 0.15
    mean_span_length: float = 3.0  # span corruption: T5's mean span
    # held-out evaluations, evenly spaced, the last after the last step
    evaluations: int = 1

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"objective must be one of {OBJECTIVES}, got {self.objective!r}"
            )
        require_size("steps", self.steps, minimum=2)
        if require_size("evaluations", self.evaluations) > self.steps:
            raise ValueError(
                f"evaluations must be <= steps={self.steps}, got {self.evaluations}"
            )
        require_size("batch_size", self.batch_size)
        require_size("validation_size", self.validation_size)
        require_size("n_sentinels", self.n_sentinels, minimum=2)
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 < self.noise_density < 1.0:
            raise ValueError(
                f"noise_density must be in (0, 1), got {self.noise_density}"
            )
        if not self.mean_span_length >= 1.0:
            raise ValueError(
                f"mean_span_length must be >= 1, got {self.mean_span_length}"
            )

    @property
    def pretraining_objective(self) -> "PretrainingObjective":
        """The code of this run's objective, reading its settings from this run."""
        return OBJECTIVE_TYPES[self.objective](self)

    @property
    def schedule(self) -> TrainConfig:
        return TrainConfig(
            steps=self.steps,
            lr=self.lr,
            warmup_steps=max(1, self.steps // 10),
            eval_every=math.ceil(self.steps / self.evaluations),
        )

    def bert_run(self) -> PretrainingRun:
        """The BERT pages' recipe that draws this run's blocks (and, for MLM and RTD,
        trains it)."""
        # Zero output bias, because GPT's and T5's output layers have no bias to start
        # at the token frequencies.
        settings = {
            "schedule": self.schedule,
            "batch_size": self.batch_size,
            "validation_size": self.validation_size,
            "output_bias": "zeros",
        }
        return self.pretraining_objective.bert_recipe(**settings)

    def body_config(self, corpus: NewsCorpus) -> BertConfig:
        return self.bert_run().config(corpus)

    def sentinels(self, corpus: NewsCorpus) -> list[int]:
        return list(
            range(
                corpus.tokenizer.vocab_size,
                corpus.tokenizer.vocab_size + self.n_sentinels,
            )
        )

    def model(self, corpus: NewsCorpus) -> nn.Module:
        return self.pretraining_objective.model(corpus)

    def body(self, model: nn.Module) -> nn.Module:
        return self.pretraining_objective.body(model)

    def batch(self, corpus: NewsCorpus, masked: PretrainingBatch, seed: int):
        return self.pretraining_objective.batch(corpus, masked, seed)

    def losses(self, model: nn.Module, batch) -> dict[str, torch.Tensor]:
        return self.pretraining_objective.losses(model, batch)

    def supervised_positions(self, batch) -> int:
        return self.pretraining_objective.supervised_positions(batch)

    def body_parameters(self, model: nn.Module) -> int:
        return self.pretraining_objective.body_parameters(model)

    def floor_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        return self.pretraining_objective.floor_log_frequencies(corpus)

    def batches(self, corpus: NewsCorpus):
        """``batch_for_step(step)``: the blocks that ``PretrainingRun.roberta()`` draws
        at this step, prepared for this objective."""
        masked_for_step = _masked_batches(corpus, self.batch_size)
        return lambda step: self.batch(corpus, masked_for_step(step), seed=step)

    def validation(self, corpus: NewsCorpus):
        """The first ``validation_size`` held-out blocks, masked (and corrupted) once,
        with fixed seeds."""
        return self.batch(corpus, self.bert_run().validation_batch(corpus), seed=12345)

    @torch.no_grad()
    def held_out_nats(
        self,
        corpus: NewsCorpus,
        model: nn.Module,
        held_out,
        log_frequencies: torch.Tensor,
    ) -> dict[str, "HeldOutNats"]:
        """The model's loss on this objective's ``held_out`` batch (``validation``)
        against the loss of a predictor that reads no context, position by position, in
        groups named by the objective; the first group is the objective's own loss.
        ``log_frequencies`` is the floor's (``floor_log_frequencies``)."""
        model.eval()
        return self.pretraining_objective.held_out_nats(
            corpus, model, held_out, log_frequencies
        )


class PretrainingObjective(ABC):
    """What one objective does its own way, for the ``ObjectiveRun`` whose settings it
    reads: its model and the body that downstream tasks read, its batches made from
    the BERT recipe's, its losses, and its held-out loss set against its floor."""

    name: str  # as an ObjectiveRun and the page call it
    model_name: str  # the model the objective is known from

    def __init__(self, run: ObjectiveRun):
        self.run = run

    def bert_recipe(self, **settings) -> PretrainingRun:
        """The BERT pages' recipe with these settings: it draws every objective's
        blocks."""
        return PretrainingRun.roberta(**settings)

    @abstractmethod
    def model(self, corpus: NewsCorpus) -> nn.Module:
        """The untrained model, from seed 0."""

    @abstractmethod
    def body(self, model: nn.Module) -> nn.Module:
        """What the downstream tasks read of ``model``."""

    @abstractmethod
    def batch(self, corpus: NewsCorpus, masked: PretrainingBatch, seed: int):
        """This objective's batch from the BERT recipe's masked batch of the same
        blocks; ``seed`` seeds any corruption of its own."""

    @abstractmethod
    def losses(self, model: nn.Module, batch) -> dict[str, torch.Tensor]:
        """The training loss ("loss") on one of its batches, and the objective's own
        metrics."""

    @abstractmethod
    def supervised_positions(self, batch) -> int:
        """Positions of ``batch`` that carry a loss."""

    def body_parameters(self, model: nn.Module) -> int:
        """Parameters of the body the downstream tasks read."""
        return sum(parameter.numel() for parameter in self.body(model).parameters())

    @abstractmethod
    def floor_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        """(V,) log p of each token among this objective's targets in the training
        blocks (``unigram_log_frequencies``): what a predictor that reads no context
        can best answer everywhere."""

    @abstractmethod
    def held_out_nats(self, corpus, model, held_out, log_frequencies) -> dict:
        """The groups of ``ObjectiveRun.held_out_nats`` ({name: HeldOutNats}), the
        model in eval mode and no gradient recorded."""

    def training_blocks(self, corpus: NewsCorpus) -> list[list[int]]:
        """The ids of every training block, ``[CLS] text [SEP]``."""
        examples = self.run.bert_run().examples(corpus, "train")
        return [example.input_ids for example in examples]

    @staticmethod
    def never_targets(corpus: NewsCorpus) -> list[int]:
        """The special ids that are in no objective's targets."""
        special = corpus.tokenizer.special_ids
        return [special["pad"], special["cls"], special["mask"]]

    @staticmethod
    def original_blocks(masked: PretrainingBatch) -> torch.Tensor:
        """(B, T): the masked batch's blocks as they were before masking."""
        return torch.where(
            masked.mlm_labels != IGNORE_INDEX, masked.mlm_labels, masked.input_ids
        )


class CausalLM(PretrainingObjective):
    """GPT's objective: every position predicts the next token, reading only the tokens
    to its left."""

    name, model_name = "causal LM", "GPT"

    def model(self, corpus: NewsCorpus) -> GPT:
        torch.manual_seed(0)
        return GPT(gpt_config(self.run.body_config(corpus)))

    def body(self, model: GPT) -> CausalBody:
        return CausalBody(model)

    def batch(self, corpus: NewsCorpus, masked: PretrainingBatch, seed: int):
        """The original blocks, and their attention mask."""
        return self.original_blocks(masked), masked.attention_mask

    def losses(self, model: GPT, batch) -> dict[str, torch.Tensor]:
        return causal_lm_losses(model, *batch)

    def supervised_positions(self, batch) -> int:
        """Every real token but a block's first."""
        return int(batch[1][:, 1:].sum())

    def floor_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        """The frequencies of the next tokens: every token of a block but its first."""
        return unigram_log_frequencies(
            [block[1:] for block in self.training_blocks(corpus)],
            corpus.tokenizer.vocab_size,
            self.never_targets(corpus),
        )

    def held_out_nats(self, corpus, model, held_out, log_frequencies):
        """One group, "next token": every next token, against the floor."""
        input_ids, attention_mask = held_out
        logits = model(input_ids)[:, :-1]  # (B, T-1, V)
        real = attention_mask[:, 1:].bool()  # (B, T-1): the next token is real
        return {
            "next token": _token_nats(
                logits[real], input_ids[:, 1:][real], log_frequencies
            )
        }


class SpanCorruption(PretrainingObjective):
    """T5's objective: spans covering 15% of the tokens become sentinels, and a decoder
    writes them out."""

    name, model_name = "span corruption", "T5"

    def model(self, corpus: NewsCorpus) -> EncoderDecoder:
        torch.manual_seed(0)
        config = t5_config(self.run.body_config(corpus), self.run.n_sentinels)
        return EncoderDecoder(config)

    def body(self, model: EncoderDecoder) -> EncoderBody:
        return EncoderBody(model)

    def batch(self, corpus: NewsCorpus, masked: PretrainingBatch, seed: int):
        """The original blocks, span-corrupted afresh with ``seed``."""
        lengths = masked.attention_mask.sum(1)
        rows = [
            row[:length].tolist()
            for row, length in zip(self.original_blocks(masked), lengths, strict=True)
        ]
        return self.corrupt(corpus, rows, random.Random(seed))

    def corrupt(self, corpus: NewsCorpus, blocks: list[list[int]], rng: random.Random):
        """``span_corruption_batch`` of ``blocks`` with this run's sentinels and span
        settings."""
        special = corpus.tokenizer.special_ids
        return span_corruption_batch(
            blocks,
            self.run.sentinels(corpus),
            rng,
            special["cls"],
            special["sep"],
            self.run.noise_density,
            self.run.mean_span_length,
        )

    def losses(self, model: EncoderDecoder, batch) -> dict[str, torch.Tensor]:
        return span_corruption_losses(model, *batch)

    def supervised_positions(self, batch) -> int:
        """The target's real tokens."""
        return int((batch[2] != PAD).sum())

    def body_parameters(self, model: EncoderDecoder) -> int:
        """T5's encoder counts its embedding table (shared with the decoder) but not the
        decoder's layers."""
        decoder = sum(
            parameter.numel() for parameter in model.decoder_layers.parameters()
        )
        return super().body_parameters(model) - decoder

    def floor_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        """The frequencies of every block's target, sentinels and [SEP] included, from
        one fixed corruption."""
        _, _, targets = self.corrupt(
            corpus, self.training_blocks(corpus), random.Random(0)
        )
        return unigram_log_frequencies(
            [row[row != PAD].tolist() for row in targets],
            corpus.tokenizer.vocab_size + self.run.n_sentinels,
            self.never_targets(corpus),
        )

    def held_out_nats(self, corpus, model, held_out, log_frequencies):
        """Three groups: "target", the target tokens, sentinels and [SEP] included;
        "hidden text", the hidden words alone, against the words' frequencies among the
        targets (a floor that, like MLM's, has nothing to learn about the target's
        layout); and "sentinels and [SEP]", that layout."""
        source, decoder_input, target = held_out
        # (N, V), (N,)
        logits, target = (
            model(source, decoder_input)[target != PAD],
            target[target != PAD],
        )
        marks = torch.tensor(
            [*self.run.sentinels(corpus), corpus.tokenizer.special_ids["sep"]]
        )
        is_mark = torch.isin(target, marks)
        text_frequencies = log_frequencies.clone()
        # what is left, renormalised: the hidden words' own frequencies
        text_frequencies[marks] = -math.inf
        text_frequencies -= text_frequencies.logsumexp(0)
        return {
            "target": _token_nats(logits, target, log_frequencies),
            "hidden text": _token_nats(
                logits[~is_mark], target[~is_mark], text_frequencies
            ),
            "sentinels and [SEP]": _token_nats(
                logits[is_mark], target[is_mark], log_frequencies
            ),
        }


class BertRecipeObjective(PretrainingObjective):
    """MLM and RTD: the BERT pages' recipes, which train on the masked batch as it is.
    Their bodies start equal (``PretrainingRun.model``)."""

    def model(self, corpus: NewsCorpus) -> nn.Module:
        return self.run.bert_run().model(corpus)

    def body(self, model: nn.Module) -> nn.Module:
        return model.bert

    def batch(self, corpus: NewsCorpus, masked: PretrainingBatch, seed: int):
        """The masked batch as it is."""
        return masked

    def losses(self, model: nn.Module, batch) -> dict[str, torch.Tensor]:
        return self.run.bert_run().losses(model, batch)

    def floor_log_frequencies(self, corpus: NewsCorpus) -> torch.Tensor:
        """The frequencies of the ordinary tokens, a uniform sample of which is masked
        (MLM's, and RTD's generator's, targets)."""
        return self.run.bert_run().token_log_frequencies(corpus)

    @staticmethod
    def predicted(corpus: NewsCorpus, held_out: PretrainingBatch):
        """(N,) each, row-major: the targets of the predicted positions, the token the
        model was shown there, and whether that was [MASK]."""
        labelled = held_out.mlm_labels != IGNORE_INDEX  # (B, T)
        targets, shown = held_out.mlm_labels[labelled], held_out.input_ids[labelled]
        return targets, shown, shown == corpus.tokenizer.special_ids["mask"]


class MaskedLM(BertRecipeObjective):
    """BERT's objective, here RoBERTa's recipe: 15% of the tokens are masked and
    predicted from both sides."""

    name, model_name = "MLM", "BERT"

    def supervised_positions(self, batch: PretrainingBatch) -> int:
        """The masked tokens."""
        return int((batch.mlm_labels != IGNORE_INDEX).sum())

    def held_out_nats(self, corpus, model, held_out, log_frequencies):
        """Three groups, by what the model saw at a predicted position (as
        ``bert_pretraining.prediction_scores``): "[MASK]", the floor that matters; "the
        true token" (kept, which the model learns to copy); and "a wrong token"."""
        targets, shown, at_mask = self.predicted(corpus, held_out)
        output = model(
            held_out.input_ids,
            held_out.segment_ids,
            held_out.attention_mask,
            held_out.mlm_labels,
        )
        groups = {
            "[MASK]": at_mask,
            "the true token": shown == targets,
            "a wrong token": ~at_mask & (shown != targets),
        }
        return {
            name: _token_nats(output.mlm_logits[where], targets[where], log_frequencies)
            for name, where in groups.items()
        }


class ReplacedTokenDetection(BertRecipeObjective):
    """ELECTRA's objective (RTD): a small generator fills the masked positions, and the
    body says for every token whether it was replaced."""

    name, model_name = "RTD", "ELECTRA"

    def bert_recipe(self, **settings) -> PretrainingRun:
        return PretrainingRun.electra(**settings)

    def supervised_positions(self, batch: PretrainingBatch) -> int:
        """Every real token (the discriminator's; its generator also predicts the masked
        ones)."""
        return int(batch.attention_mask.sum())

    def held_out_nats(self, corpus, model, held_out, log_frequencies):
        """Two groups: "replaced?", every real token, against always answering the
        held-out share p of replaced tokens (mean: the binary entropy H(p)); and
        "generator at [MASK]", against the floor."""
        targets, _, at_mask = self.predicted(corpus, held_out)
        output = electra_forward(  # on the samples training evaluates on
            model,
            held_out.input_ids,
            held_out.mlm_labels,
            held_out.segment_ids,
            held_out.attention_mask,
            self.run.bert_run().rtd_weight,
            torch.Generator().manual_seed(held_out.seed),
        )
        real = held_out.attention_mask.bool()
        labels, logits = output.rtd_labels[real], output.rtd_logits[real]  # (N,) each
        p = labels.mean()  # the share replaced
        # (N,): mean H(p)
        floor = torch.where(labels == 1, -torch.log(p), -torch.log1p(-p))
        return {
            "replaced?": HeldOutNats(
                F.binary_cross_entropy_with_logits(logits, labels, reduction="none"),
                floor,
                (logits > 0).float() == labels,
            ),
            "generator at [MASK]": _token_nats(
                output.mlm_logits[at_mask], targets[at_mask], log_frequencies
            ),
        }


# The objectives by name, in the order the page shows them.
OBJECTIVE_TYPES = {
    objective.name: objective
    for objective in (CausalLM, MaskedLM, SpanCorruption, ReplacedTokenDetection)
}
OBJECTIVES = tuple(OBJECTIVE_TYPES)
MODEL_OF = {name: objective.model_name for name, objective in OBJECTIVE_TYPES.items()}


@dataclass
class HeldOutNats:
    """One group of held-out positions: the model's loss at each and a no-context
    predictor's, in nats."""

    loss: torch.Tensor  # (N,)
    floor: torch.Tensor  # (N,)
    # (N,) bool: the model's answer (argmax, or logit > 0) is right
    correct: torch.Tensor

    @property
    def below_floor(self) -> float:
        """Mean floor - loss: the nats per position the model gained by reading its
        input (< 0: above the floor).

        >>> HeldOutNats(
        ...     torch.tensor([1.0, 2.0]),
        ...     torch.tensor([1.5, 2.5]),
        ...     torch.tensor([True, False]),
        ... ).below_floor
        0.5
        """
        return (self.floor - self.loss).mean().item()

    @property
    def standard_error(self) -> float:
        """The standard error of ``below_floor`` over these positions (paired: one
        target, two losses)."""
        return (
            ((self.floor - self.loss).std() / math.sqrt(len(self.loss))).item()
            if len(self.loss) > 1
            else math.nan
        )

    def metrics(self, group: str) -> dict[str, float]:
        """What ``pretrain`` logs at each evaluation (a group with no positions gives
        NaN)."""
        return {
            f"{group} loss": self.loss.mean().item(),
            f"{group} floor": self.floor.mean().item(),
            f"{group} accuracy": self.correct.float().mean().item(),
            f"{group} positions": len(self.loss),
            f"{group} standard error": self.standard_error,
        }


def _token_nats(
    logits: torch.Tensor, targets: torch.Tensor, log_frequencies: torch.Tensor
) -> HeldOutNats:
    """(N, V) logits and (N,) targets: the cross-entropy at each position, and the
    unigram predictor's."""
    return HeldOutNats(
        F.cross_entropy(logits, targets, reduction="none"),
        -log_frequencies[targets],
        logits.argmax(-1) == targets,
    )


# (id(corpus), batch_size) -> (corpus, batches)
_BATCHES: dict[tuple[int, int], tuple[NewsCorpus, object]] = {}


def _masked_batches(corpus: NewsCorpus, batch_size: int):
    """``PretrainingRun.roberta(batch_size=...).batches(corpus)``, kept: cutting the
    articles into blocks takes a fifth of a second, and a page asks for the same batches
    a dozen times. (ELECTRA's run draws the same ones.)"""
    key = (id(corpus), batch_size)
    # the corpus is held, so its id is not reused
    if key not in _BATCHES or _BATCHES[key][0] is not corpus:
        if len(_BATCHES) >= 4:
            _BATCHES.clear()
        _BATCHES[key] = (
            corpus,
            PretrainingRun.roberta(batch_size=batch_size).batches(corpus),
        )
    return _BATCHES[key][1]


def span_corruption_batch(
    blocks: list[list[int]],
    sentinels: list[int],
    rng: random.Random,
    cls_id: int,
    sep_id: int,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """T5's objective on ``[CLS] text [SEP]`` blocks: the text between the two is
    span-corrupted (``denoising.random_noise_mask``, ``sentinel_corruption``). Returns,
    right-padded with [PAD] = 0:

    - the encoder's input, ``[CLS] corrupted text [SEP]``, (B, S);
    - the decoder's input, ``[CLS]`` then the target without its last token, (B, T):
    [CLS] is the start token;
    - the target, each sentinel and the tokens it hid, the final sentinel, ``[SEP]``,
    (B, T).

    A text of fewer than 2 tokens is left whole (its target is the final sentinel
    alone).

    >>> source, decoder_input, target = span_corruption_batch(
    ...     [[2, 10, 11, 12, 13, 3]],
    ...     [90, 91],
    ...     random.Random(0),
    ...     cls_id=2,
    ...     sep_id=3,
    ...     noise_density=0.25,
    ... )
    >>> source.tolist(), decoder_input.tolist(), target.tolist()
    ([[2, 10, 11, 12, 90, 3]], [[2, 90, 13, 91]], [[90, 13, 91, 3]])
    """
    sources, targets = [], []
    for block in blocks:
        text = block[1:-1]
        noise = (
            random_noise_mask(len(text), rng, noise_density, mean_span_length)
            if len(text) >= 2
            else [False] * len(text)
        )
        inputs, spans = sentinel_corruption(text, noise, sentinels)
        sources.append([cls_id, *inputs, sep_id])
        targets.append([*spans, sep_id])
    source, _ = pad(sources, PAD)
    target, _ = pad(targets, PAD)
    # shifted right
    decoder_input = torch.cat(
        [torch.full_like(target[:, :1], cls_id), target[:, :-1]], dim=1
    )
    return source, decoder_input, target


def causal_lm_losses(
    model: GPT, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """GPT's next-token loss on right-padded blocks: position t predicts token t + 1,
    and a padding token is never a target. Also the share of next tokens predicted right
    (argmax)."""
    # (B, T-1, V): the last position has no next token
    logits = model(input_ids)[:, :-1]
    # (B, T-1)
    targets = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    real = targets != IGNORE_INDEX
    return {
        "loss": F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX
        ),
        "accuracy": (logits.argmax(-1) == targets)[real].float().mean(),
    }


def span_corruption_losses(
    model: EncoderDecoder,
    source: torch.Tensor,
    decoder_input: torch.Tensor,
    target: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Cross-entropy over the target's real tokens (teacher forcing), and the share
    predicted right."""
    logits = model(source, decoder_input)  # (B, T, V)
    real = target != PAD
    return {
        "loss": sequence_loss(logits, target),
        "accuracy": (logits.argmax(-1) == target)[real].float().mean(),
    }


def step_flops(corpus: NewsCorpus, run: ObjectiveRun, samples: int = 4) -> float:
    """Mean FLOPs of one training step (forward and backward,
    ``measure.training_flops``) over the batches of the first ``samples`` steps: a
    step's cost varies a little with its blocks' lengths and masks."""
    require_size("samples", samples)
    model, batch_for_step = run.model(corpus).train(), run.batches(corpus)
    return (
        sum(
            training_flops(model, run.losses, batch_for_step(step))
            for step in range(samples)
        )
        / samples
    )


@dataclass
class Pretrained:
    run: ObjectiveRun
    # the whole pretraining model in eval mode, ELECTRA's generator and T5's decoder too
    model: nn.Module
    body: nn.Module  # what the downstream tasks read (``ObjectiveRun.body``)
    # "loss" and the objective's own metrics per step, held-out ones per evaluation
    history: History


def pretrain(
    corpus: NewsCorpus, run: ObjectiveRun, progress: bool | None = None
) -> Pretrained:
    """Train ``run`` on ``corpus``, or load it from this build's checkpoint. Each of
    ``run.evaluations`` evaluations logs, for every group of ``run.held_out_nats`` on
    the held-out blocks, ``HeldOutNats.metrics``: "<group> loss", "<group> floor",
    "<group> accuracy", "<group> positions" and "<group> standard error" (the first
    group's loss is the objective's own: "next token loss", "[MASK] loss", "target
    loss", "replaced? loss")."""
    validation, log_frequencies = (
        run.validation(corpus),
        run.floor_log_frequencies(corpus),
    )

    def evaluate(model: nn.Module) -> dict[str, float]:
        groups = run.held_out_nats(corpus, model, validation, log_frequencies)
        return {
            name: value
            for group, nats in groups.items()
            for name, value in nats.metrics(group).items()
        }

    model = run.model(corpus)
    settings = {
        "run": asdict(run),
        "vocab": corpus.tokenizer.id_to_token,
        "articles": len(corpus.articles),
        "blocks": len(run.bert_run().examples(corpus, "train")),
    }
    history = train(
        model,
        run.batches(corpus),
        run.losses,
        run.schedule,
        evaluate=evaluate,
        checkpoint=checkpoint_path(
            f"objective-{run.objective.replace(' ', '-')}", settings
        ),
        progress=progress,
    )
    model.eval()
    return Pretrained(run, model, run.body(model), history)

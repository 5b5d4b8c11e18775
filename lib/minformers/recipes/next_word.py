"""BERT as a next-word predictor: seed 001's claim that a model trained only to
reconstruct its input can be fine-tuned to predict the next word "with a shift by 1".

The file holds one page's whole experiment (its model, data, training and
measurements), to be read together.

Two changes turn our BERT into a language model, ``BertForNextWord``:

- a causal mask (``BertModel(..., causal=True)``), so position t reads tokens 0..t and
  never the answer;
- targets shifted by one: the MLM head, whose output matrix is the token embedding
  table, scores at position t the token at t + 1, where MLM scored the token at t.

The rest is the objectives page's causal-LM setup
(``minformers.recipes.objective_comparison``): the same contiguous 32-token blocks of
BBC news, drawn in the same order, the same loss (``causal_lm_losses``) and a GPT of the
tiny BERT's shape (``gpt_config``). ``train_next_word`` trains any of the three models
of the comparison with one recipe, ``NextWordRun``. The targets, with padding anywhere:

    >>> ids, mask = torch.tensor([[2, 7, 8, 3, 0]]), torch.tensor([[1, 1, 1, 1, 0]])
    >>> next_token_targets(ids, mask).tolist()
    [[7, 8, 3, -100, -100]]
"""

import contextlib
import io
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bert import (
    IGNORE_INDEX,
    BertConfig,
    BertForPreTraining,
    BertMLMHead,
    BertModel,
)
from minformers.recipes.bert_pretraining import PretrainingRun
from minformers.recipes.news import NewsCorpus
from minformers.recipes.objective_comparison import ObjectiveRun, causal_lm_losses
from minformers.support.arguments import require_size
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.train import TrainConfig, train

# the three runs of the comparison
MODELS = ("pretrained BERT", "BERT from scratch", "GPT")


def next_token_targets(
    input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """(B, T) ids and 1/0 mask -> (B, T) targets for a next-token loss read at every
    position: position t's target is token t + 1 when both t and t + 1 are real tokens,
    and -100 (ignored) otherwise, so the last position, the padding, and (with left
    padding) a pad before the first real token carry no loss.

    >>> ids, mask = torch.tensor([[0, 0, 5, 6, 7]]), torch.tensor([[0, 0, 1, 1, 1]])
    >>> next_token_targets(ids, mask).tolist()
    [[-100, -100, 6, 7, -100]]
    """
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            "input_ids and attention_mask must both be (B, T), got "
            f"{tuple(input_ids.shape)} and {tuple(attention_mask.shape)}"
        )
    real = attention_mask.bool()
    targets = torch.full_like(input_ids, IGNORE_INDEX)  # (B, T)
    # (B, T - 1): the pair (t, t + 1) is real text
    both_real = real[:, :-1] & real[:, 1:]
    # shift left by one
    targets[:, :-1] = input_ids[:, 1:].masked_fill(~both_real, IGNORE_INDEX)
    return targets


class BertForNextWord(nn.Module):
    """Our BERT read with a causal mask, and the MLM head (tied to the token embeddings)
    giving at position t the logits of token t + 1: ``(B, T) -> (B, T, V)``, as ``GPT``
    does.

    >>> model = BertForNextWord(BertConfig.tiny(vocab_size=50))
    >>> model(torch.tensor([[2, 7, 9, 3]])).shape
    torch.Size([1, 4, 50])
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm_head = BertMLMHead(config, self.bert.embeddings.token_embedding)

    @classmethod
    def from_pretraining(cls, model: BertForPreTraining) -> "BertForNextWord":
        """A copy of a ``BertForPreTraining``'s encoder and MLM head (its NSP head is
        dropped); the model given is left unchanged."""
        if not isinstance(model, BertForPreTraining):
            raise TypeError(
                f"model must be a BertForPreTraining, got {type(model).__name__}"
            )
        next_word = cls(model.config)
        next_word.bert.load_state_dict(model.bert.state_dict())
        head = {
            name: tensor
            for name, tensor in model.mlm_head.state_dict().items()
            if name != "decoder.weight"
        }
        # decoder.weight is the (copied) embedding table
        next_word.mlm_head.load_state_dict(head, strict=False)
        return next_word.to(model.mlm_head.decoder.bias.device)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input_ids, attention_mask: (B, T). With right padding the mask changes no
        real position's logits (the causal mask already hides every later token), so
        blocks can be given without it, as to GPT."""
        # (B, T, C)
        hidden = self.bert(
            input_ids, attention_mask=attention_mask, causal=True
        ).hidden_states
        # (B, T, C) -> (B, T, V): position t scores token t + 1
        return self.mlm_head(hidden)


class MaskedNextWord(nn.Module):
    """A pretrained BERT used as it was trained, with no fine-tuning: to predict token
    t + 1, it reads tokens 0..t followed by one [MASK], bidirectionally, and its MLM
    head fills the mask. ``(B, T) -> (B, T, V)`` like a language model (the last
    position, which has no next token, gets zeros): it costs T - 1 forward passes of up
    to T tokens per block, where a language model needs one.
    """

    def __init__(self, model: BertForPreTraining, mask_id: int, chunk_size: int = 32):
        super().__init__()
        self.model, self.mask_id = model, require_size("mask_id", mask_id, minimum=0)
        self.chunk_size = require_size("chunk_size", chunk_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        B, T = input_ids.shape
        steps = torch.arange(T - 1)  # (T - 1,): row t predicts token t + 1
        # (T - 1, T): row t keeps tokens 0..t
        keep = torch.arange(T)[None, :] <= steps[:, None]
        # (B, T-1, T)
        rows = (
            input_ids[:, None, :]
            .expand(B, T - 1, T)
            .masked_fill(~keep, self.model.config.pad_id)
        )
        # row t: tokens 0..t, [MASK] at t + 1, then [PAD]
        rows[:, steps, steps + 1] = self.mask_id
        # (B (T - 1), T)
        attention = (keep | (torch.arange(T)[None, :] == steps[:, None] + 1)).repeat(
            B, 1
        )
        # (B (T - 1), T) and each row's [MASK] position
        rows, at = rows.flatten(0, 1), (steps + 1).repeat(B)
        logits = []
        # chunk_size blocks at a time
        for start in range(0, len(rows), self.chunk_size * (T - 1)):
            chunk = slice(start, start + self.chunk_size * (T - 1))
            # (N, T, C)
            hidden = self.model.bert(
                rows[chunk], attention_mask=attention[chunk]
            ).hidden_states
            # (N, C) -> (N, V)
            logits.append(
                self.model.mlm_head(hidden[torch.arange(hidden.shape[0]), at[chunk]])
            )
        # (B (T - 1), V) -> (B, T - 1, V)
        logits = torch.cat(logits).unflatten(0, (B, T - 1))
        return torch.cat([logits, torch.zeros_like(logits[:, :1])], dim=1)  # (B, T, V)


def unigram_loss(
    train_blocks: torch.Tensor,
    train_mask: torch.Tensor,
    validation_blocks: torch.Tensor,
    validation_mask: torch.Tensor,
    vocab_size: int,
) -> float:
    """The held-out next-token loss (nats) of the best predictor that reads no context:
    every position predicts the training targets' token frequencies (add-one smoothed,
    so no held-out token has probability 0).

    >>> blocks, mask = torch.tensor([[2, 5, 5, 3]]), torch.ones(1, 4, dtype=torch.long)
    >>> # p(5) = 3/9, p(3) = 2/9
    >>> round(unigram_loss(blocks, mask, blocks, mask, vocab_size=6), 4)
    1.2338
    """
    require_size("vocab_size", vocab_size)
    targets = next_token_targets(train_blocks, train_mask)
    counts = (
        torch.bincount(targets[targets != IGNORE_INDEX], minlength=vocab_size).double()
        + 1.0
    )
    log_probabilities = (counts / counts.sum()).log()  # (V,)
    held_out = next_token_targets(validation_blocks, validation_mask)
    return -log_probabilities[held_out[held_out != IGNORE_INDEX]].mean().item()


@dataclass(frozen=True)
class NextWordRun:
    """The one recipe all three models are trained with: ``steps`` AdamW steps of
    ``batch_size`` blocks (the blocks the objectives page's runs read, step by step),
    peak ``lr`` after 10% warmup, then cosine decay."""

    steps: int = 120  # training steps, the same for every model
    batch_size: int = 16  # 32-token blocks per step
    lr: float = 2e-3  # the BERT pages' pretraining rate; not tuned for any of the three
    eval_every: int = 20  # held-out loss every this many steps (and at the last)
    validation_size: int = 256  # held-out blocks from the validation articles
    # 0: the objectives page's order of blocks; another value draws another order
    data_seed: int = 0

    def __post_init__(self):
        require_size("steps", self.steps, minimum=2)
        require_size("batch_size", self.batch_size)
        require_size("eval_every", self.eval_every)
        require_size("validation_size", self.validation_size)
        require_size("data_seed", self.data_seed, minimum=0)
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")

    @property
    def schedule(self) -> TrainConfig:
        return TrainConfig(
            steps=self.steps,
            lr=self.lr,
            warmup_steps=max(1, self.steps // 10),
            eval_every=min(self.eval_every, self.steps),
        )

    @property
    def objective_run(self) -> ObjectiveRun:
        """The objectives page's causal-LM run with these sizes: its blocks, its GPT,
        its validation blocks."""
        return ObjectiveRun(
            "causal LM",
            steps=self.steps,
            lr=self.lr,
            batch_size=self.batch_size,
            validation_size=self.validation_size,
        )

    def batches(self, corpus: NewsCorpus):
        """``batch_for_step(step)`` -> (blocks (B, T), attention_mask (B, T));
        ``data_seed`` shifts the steps whose draws are used, so each seed reads its own
        order of blocks."""
        batch_for_step = self.objective_run.batches(corpus)
        return lambda step: batch_for_step(step + 1_000_003 * self.data_seed)

    def validation(self, corpus: NewsCorpus) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``validation_size`` blocks of the validation articles, and
        their attention mask."""
        return self.objective_run.validation(corpus)

    def model(
        self,
        corpus: NewsCorpus,
        name: str,
        pretrained: BertForPreTraining | None = None,
    ) -> nn.Module:
        """The untrained model of one run (``name`` in MODELS). The BERT from scratch
        starts from the weights the BERT page's pretraining started from, but with
        BERT's zero output bias rather than the unigram one, as the GPT's output layer
        has no bias to start anywhere else; a ``data_seed`` > 0 draws other weights.
        "pretrained BERT" copies ``pretrained``."""
        if name not in MODELS:
            raise ValueError(f"name must be one of {MODELS}, got {name!r}")
        if name == "pretrained BERT":
            if pretrained is None:
                raise ValueError(
                    "the pretrained BERT run needs pretrained, a BertForPreTraining"
                )
            return BertForNextWord.from_pretraining(pretrained)
        if pretrained is not None:
            raise ValueError(
                f"only the pretrained BERT run takes pretrained, not {name!r}"
            )
        if name == "GPT":
            model = self.objective_run.model(corpus)  # seeds 0 itself
            if self.data_seed:
                torch.manual_seed(self.data_seed)
                model = type(model)(model.config)
            return model
        torch.manual_seed(self.data_seed)
        config = PretrainingRun().config(corpus)
        return BertForNextWord.from_pretraining(BertForPreTraining(config))


def next_word_losses(
    model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The next-token loss and accuracy of any of the three models on right-padded
    blocks (``objective_comparison.causal_lm_losses``: the same targets for each)."""
    return causal_lm_losses(model, *batch)


@torch.no_grad()
def held_out(
    model: nn.Module, validation: tuple[torch.Tensor, torch.Tensor]
) -> dict[str, float]:
    """``next_word_losses`` on the validation blocks, in eval mode, without gradients,
    as plain floats."""
    model.eval()
    return {
        f"val_{name}": value.item()
        for name, value in next_word_losses(model, validation).items()
    }


@torch.no_grad()
def block_losses(
    model: nn.Module, blocks: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """(B,) each block's mean next-token loss (nats): the unit whose spread gives a
    comparison's standard error."""
    model.eval()
    logits = model(blocks)  # (B, T, V)
    targets = next_token_targets(blocks, attention_mask)  # (B, T)
    # (B, T)
    losses = F.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE_INDEX, reduction="none"
    )
    return losses.sum(1) / (targets != IGNORE_INDEX).sum(1).clamp(min=1)


@torch.no_grad()
def attention_to_later_tokens(
    bert: BertModel, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> list[float]:
    """For each layer of ``bert`` run as pretrained (bidirectionally), the share of its
    attention that real tokens pay to tokens after them, averaged over heads and real
    positions: what a causal mask takes away. A model that spread its attention evenly
    over a full block of T tokens would give (T - 1) / 2T, just under one half."""
    T = input_ids.shape[1]
    # (T, T): key j > query i
    later = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    real = attention_mask.bool()  # (B, T)
    # (B, 1, 1, T): padding is never attended, as in BertModel
    keys = real[:, None, None, :]
    x, shares = bert.embeddings(input_ids), []  # (B, T, C)
    for layer in bert.layers:
        _, weights = layer.attention(x, mask=keys, return_weights=True)  # (B, H, T, T)
        # (B, H, T) -> (B, T): per query, the weight on later keys
        share = (weights * later).sum(-1).mean(1)
        shares.append(share[real].mean().item())
        # post-LN: the block's attention read x itself, as above
        x = layer(x, mask=keys)
    return shares


@dataclass
class NextWordResult:
    name: str  # one of MODELS
    model: nn.Module  # trained, in eval mode
    # "loss", "accuracy" per step; "val_loss", "val_accuracy" every eval_every steps
    history: History


def train_next_word(
    corpus: NewsCorpus,
    run: NextWordRun,
    name: str,
    pretrained: BertForPreTraining | None = None,
    pretraining: PretrainingRun | None = None,
    progress: bool | None = None,
) -> NextWordResult:
    """Train one of MODELS with ``run`` on ``corpus``'s blocks, or load it from this
    build's checkpoint. ``pretrained`` is the BERT the "pretrained BERT" run starts
    from, and ``pretraining`` the run that made it (its settings, with the lib's source,
    name those weights in the checkpoint's key)."""
    if (pretrained is None) != (pretraining is None):
        raise ValueError(
            "give pretrained and pretraining together (the weights and the run that "
            "made them)"
        )
    validation = run.validation(corpus)
    model = run.model(corpus, name, pretrained)
    settings = {
        "run": asdict(run),
        "name": name,
        "vocab": corpus.tokenizer.id_to_token,
        "articles": len(corpus.articles),
        "pretraining": None if pretraining is None else asdict(pretraining),
    }
    history = train(
        model,
        run.batches(corpus),
        next_word_losses,
        run.schedule,
        evaluate=lambda model: held_out(model, validation),
        checkpoint=checkpoint_path(f"next-word-{name.replace(' ', '-')}", settings),
        progress=progress,
    )
    return NextWordResult(name, model.eval(), history)


def train_next_word_quietly(job: tuple) -> NextWordResult:
    """``train_next_word(*job)`` without a printed line: one run for a worker process
    (``parallel.map_in_workers``), where lines from two runs would interleave."""
    with contextlib.redirect_stderr(io.StringIO()):
        return train_next_word(*job, progress=False)

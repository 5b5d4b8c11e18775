"""ELECTRA (Clark et al., 2020): pretraining by replaced-token detection.

A small generator, itself a BERT trained with MLM, fills the masked positions with
tokens sampled from its own predictions. A larger discriminator reads the corrupted text
and says, for every position, whether the token is the original or a replacement. Its
loss covers all positions, where MLM learns from the 15% that were masked. Both are our
BERT: the discriminator is ``BertModel`` with a per-token head, the generator
``BertForPreTraining`` of a quarter of the width, and the two share one set of
embeddings.

    >>> model = Electra(BertConfig.tiny(vocab_size=100)).eval()
    >>> ids = torch.tensor([[2, 17, 42, 3]])
    >>> model.discriminator(ids).shape  # one logit per token: > 0 means "replaced"
    torch.Size([1, 4])
    >>> shared = model.discriminator.bert.embeddings.token_embedding
    >>> model.generator.bert.embeddings.token_embedding is shared
    True

The loss is ``L_MLM(generator) + rtd_weight * L_RTD(discriminator)``
(``electra_losses``). The sampling is not differentiable, and no gradient is sent
through it: the generator learns only from its MLM loss.
"""

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bert import (
    ACTIVATIONS,
    BertConfig,
    BertForPreTraining,
    BertModel,
    init_bert_weights,
)
from minformers.objectives import IGNORE_INDEX, replace_tokens, replaced_token_labels

SHARED_EMBEDDINGS = (
    "token_embedding",
    "segment_embedding",
    "position_embedding",
    "norm",
)


def generator_config(discriminator: BertConfig, divisor: int = 4) -> BertConfig:
    """The generator: the discriminator's depth, 1/``divisor`` of its width, heads and
    feed-forward width. Its embedding tables keep the discriminator's width (they are
    shared) and a Linear projects them down, like ALBERT's factorized embedding. The
    paper found generators 1/4 to 1/2 of the discriminator's size work best: a stronger
    generator makes replacements too hard to detect early in training."""
    if discriminator.d_model % divisor or discriminator.d_ff % divisor:
        raise ValueError(
            f"divisor must divide d_model={discriminator.d_model} and "
            f"d_ff={discriminator.d_ff}, got {divisor}"
        )
    return replace(
        discriminator,
        d_model=discriminator.d_model // divisor,
        n_heads=max(1, discriminator.n_heads // divisor),
        d_ff=discriminator.d_ff // divisor,
        embedding_size=discriminator.embedding_width,
        share_layers=False,
    )


class ElectraDiscriminator(nn.Module):
    """BertModel, then per token Linear(C, C), the activation and Linear(C, 1): a logit
    that the token was replaced. The head is HF's ``ElectraDiscriminatorPredictions``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.activation = ACTIVATIONS[config.activation]()
        self.prediction = nn.Linear(config.d_model, 1)
        self.dense.apply(init_bert_weights)
        self.prediction.apply(init_bert_weights)

    def forward(self, input_ids, segment_ids=None, attention_mask=None) -> torch.Tensor:
        # (B, T, C)
        hidden = self.bert(input_ids, segment_ids, attention_mask).hidden_states
        # (B, T, C) -> (B, T)
        return self.prediction(self.activation(self.dense(hidden))).squeeze(-1)


class Electra(nn.Module):
    """Generator and discriminator, sharing token, segment and position embeddings and
    the embedding LayerNorm. ``.bert`` is the discriminator's encoder, what fine-tuning
    starts from (``BertForSequenceClassification.from_body``).
    """

    def __init__(self, config: BertConfig, generator_divisor: int = 4):
        super().__init__()
        self.config = config
        self.discriminator = ElectraDiscriminator(config)
        self.generator = BertForPreTraining(generator_config(config, generator_divisor))
        shared, own = self.discriminator.bert.embeddings, self.generator.bert.embeddings
        for name in SHARED_EMBEDDINGS:
            # one module in both: its gradients add up from both losses
            setattr(own, name, getattr(shared, name))
        # the generator's output stays tied
        self.generator.mlm_head.decoder.weight = shared.token_embedding.weight

    @property
    def bert(self) -> BertModel:
        return self.discriminator.bert


@dataclass
class ElectraOutput:
    loss: torch.Tensor  # mlm_loss + rtd_weight * rtd_loss: what is optimised
    mlm_loss: torch.Tensor  # the generator's cross-entropy at the masked positions
    # the discriminator's binary cross-entropy, mean over real (not padding) tokens
    rtd_loss: torch.Tensor
    # (N, V): the generator's predictions at the N masked positions, row-major
    mlm_logits: torch.Tensor
    corrupted_ids: torch.Tensor  # (B, T): the discriminator's input
    # (B, T): 1.0 where corrupted_ids differs from the original
    rtd_labels: torch.Tensor
    rtd_logits: torch.Tensor  # (B, T)


def electra_forward(
    model: Electra,
    input_ids,
    mlm_labels,
    segment_ids=None,
    attention_mask=None,
    rtd_weight: float = 50.0,
    generator: torch.Generator | None = None,
) -> ElectraOutput:
    """One ELECTRA step's forward pass on a batch masked for MLM (``input_ids`` hold
    [MASK] and the other replacements; ``mlm_labels`` the original ids there and -100
    elsewhere, as ``objectives.mask_tokens`` gives).

    The generator predicts the masked tokens; a token is sampled from each prediction
    (temperature 1, with ``generator`` as the random source); the original text with the
    samples put in is the discriminator's input. rtd_weight 50 is the paper's lambda:
    the binary loss is much smaller than the V-way one.
    """
    if not rtd_weight >= 0:
        raise ValueError(f"rtd_weight must be >= 0, got {rtd_weight}")
    generated = model.generator(
        input_ids, segment_ids, attention_mask, mlm_labels=mlm_labels
    )
    # sampling has no gradient; ELECTRA does not try to pass one through it
    with torch.no_grad():
        probabilities = F.softmax(generated.mlm_logits.float(), dim=-1)  # (N, V)
        # (N,)
        sampled = torch.multinomial(probabilities, 1, generator=generator).squeeze(1)
    labelled = mlm_labels != IGNORE_INDEX
    original_ids = torch.where(labelled, mlm_labels, input_ids)  # undo the masking
    corrupted = replace_tokens(original_ids, mlm_labels, sampled)
    labels = replaced_token_labels(original_ids, corrupted)
    logits = model.discriminator(corrupted, segment_ids, attention_mask)
    real = torch.ones_like(labels) if attention_mask is None else attention_mask.float()
    per_token = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
    rtd_loss = (per_token * real).sum() / real.sum()
    return ElectraOutput(
        generated.mlm_loss + rtd_weight * rtd_loss,
        generated.mlm_loss,
        rtd_loss,
        generated.mlm_logits,
        corrupted,
        labels,
        logits,
    )

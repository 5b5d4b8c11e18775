"""BERT (Devlin et al., 2019): a stack of post-LN transformer blocks over token +
segment + position embeddings, pretrained with two heads, masked-language modelling
(MLM) and next-sentence prediction (NSP).

Over 350 lines: the embeddings, the body, the pretraining heads and the classifier, with
ALBERT's factorized embedding and shared layers as options of the same classes.

Shape legend: B batch, T time, C channels = d_model, V vocab size. Every layer is
``blocks.TransformerBlock`` with ``norm_first=False`` (BERT's LayerNorm after each
residual add); attention masks follow ``minformers.masks`` (bool, True = may attend).

    >>> model = BertForPreTraining(BertConfig.tiny(vocab_size=100)).eval()
    >>> ids = torch.tensor([[2, 17, 42, 3, 0, 0]])  # [CLS] a b [SEP] [PAD] [PAD]
    >>> out = model(ids, attention_mask=ids != 0)
    >>> out.mlm_logits.shape, out.nsp_logits.shape  # (B, T, V), (B, 2)
    (torch.Size([1, 6, 100]), torch.Size([1, 2]))
    >>> count_parameters(BertConfig.base())  # BERT-base with both pretraining heads
    110106428
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.blocks import ACTIVATIONS, TransformerBlock
from minformers.objectives import IGNORE_INDEX
from minformers.positions import LearnedPositions
from minformers.support.arguments import (
    require_context,
    require_heads,
    require_ids,
    require_size,
)


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT model; the defaults are BERT-base's.

    >>> BertConfig(d_model=100, n_heads=12)
    Traceback (most recent call last):
    ValueError: d_model must be divisible by n_heads, got 100 and 12
    """

    # WordPiece vocab of bert-base-uncased (about 30k pieces cover English well)
    vocab_size: int = 30522
    d_model: int = 768  # C, width of every hidden state; 768 = 12 heads x 64
    n_layers: int = 12  # number of transformer blocks (BERT-base 12, BERT-large 24)
    n_heads: int = 12  # attention heads per block, each of width d_model / n_heads = 64
    # hidden width of the feed-forward network: 4 x d_model, as in the Transformer
    d_ff: int = 3072
    # learned positions (HF's max_position_embeddings), as many as BERT's longest input
    max_len: int = 512
    # segment (token type) embeddings: sentence A and sentence B for NSP
    n_segments: int = 2
    # BERT's drop probability on embeddings, attention weights and sublayer outputs
    dropout: float = 0.1
    # BERT's TensorFlow value; torch's default 1e-5 would change the outputs slightly
    layer_norm_eps: float = 1e-12
    # id of [PAD], as in HF: its embedding row starts at zero and gets no gradient
    pad_id: int = 0
    # the nonlinearity of the feed-forward and the MLM transform: BERT's exact erf GELU
    activation: str = "gelu"
    # E (ALBERT): embeddings V x E, then a Linear E -> C; None: E = C, no Linear
    embedding_size: int | None = None
    share_layers: bool = False  # ALBERT: one block's parameters applied n_layers times

    @property
    def embedding_width(self) -> int:
        """The width of the embedding tables and of the MLM head's transform: E when
        the embedding is factorized, else C."""
        return self.d_model if self.embedding_size is None else self.embedding_size

    def __post_init__(self):
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "d_ff",
            "max_len",
            "n_segments",
        ):
            require_size(name, getattr(self, name))
        require_heads(self.d_model, self.n_heads)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")
        require_size("pad_id", self.pad_id, minimum=0)
        if self.pad_id >= self.vocab_size:
            raise ValueError(
                f"pad_id must be < vocab_size={self.vocab_size}, got {self.pad_id}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got "
                f"{self.activation!r}"
            )
        if self.embedding_size is not None:
            require_size("embedding_size", self.embedding_size)

    @classmethod
    def base(cls, **changes) -> "BertConfig":
        """BERT-base: 12 layers, 768 wide, 12 heads; 110M parameters with the two
        pretraining heads."""
        return cls(**changes)

    @classmethod
    def large(cls, **changes) -> "BertConfig":
        """BERT-large: 24 layers, 1024 wide, 16 heads (about 335M parameters)."""
        return cls(
            **{"d_model": 1024, "n_layers": 24, "n_heads": 16, "d_ff": 4096, **changes}
        )

    @classmethod
    def albert(cls, size: str = "base", **changes) -> "BertConfig":
        """ALBERT (Lan et al., 2020): BERT with a factorized embedding (E = 128) and all
        layers sharing one set of weights, a 30,000-piece SentencePiece vocabulary;
        "base", "large", "xlarge" or "xxlarge"."""
        sizes = {
            "base": (768, 12, 12),
            "large": (1024, 24, 16),
            "xlarge": (2048, 24, 32),
            "xxlarge": (4096, 12, 64),
        }
        if size not in sizes:
            raise ValueError(f"size must be one of {list(sizes)}, got {size!r}")
        d_model, n_layers, n_heads = sizes[size]
        albert = {
            "vocab_size": 30000,
            "d_model": d_model,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "d_ff": 4 * d_model,
            "embedding_size": 128,
            "share_layers": True,
            "activation": "gelu_tanh",
        }
        return cls(**{**albert, **changes})

    @classmethod
    def tiny(cls, vocab_size: int, **changes) -> "BertConfig":
        """2 layers, 128 wide: pretrains for a minute on one CPU core. No dropout, since
        such short runs underfit."""
        sizes = {
            "d_model": 128,
            "n_layers": 2,
            "n_heads": 2,
            "d_ff": 512,
            "max_len": 128,
            "dropout": 0.0,
        }
        return cls(**{"vocab_size": vocab_size, **sizes, **changes})


def count_parameters(config: BertConfig, heads: bool = True) -> int:
    """Parameters of ``BertForPreTraining(config)``, or of ``BertModel(config)`` with
    ``heads=False``. Tied weights count once. The model is built on the meta device,
    so nothing is allocated."""
    with torch.device("meta"):
        model = BertForPreTraining(config) if heads else BertModel(config)
    return sum(parameter.numel() for parameter in model.parameters())


def init_bert_weights(module: nn.Module) -> None:
    """BERT's init: Linear and Embedding weights ~ N(0, 0.02), biases 0, LayerNorm
    weight 1 and bias 0.

    A fixed small std (not PyTorch's fan-in scaling) is what BERT and HF use; the [PAD]
    row starts at zero.
    """
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertEmbeddings(nn.Module):
    """token + segment + learned position embeddings, then LayerNorm and dropout:
    (B, T) ids -> (B, T, C).

    Factorized (ALBERT, ``embedding_size`` E): the tables are E wide and a Linear E -> C
    follows, so the vocabulary costs V x E + E x C parameters instead of V x C.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        E = config.embedding_width
        self.token_embedding = nn.Embedding(
            config.vocab_size, E, padding_idx=config.pad_id
        )
        self.segment_embedding = nn.Embedding(config.n_segments, E)
        self.position_embedding = LearnedPositions(config.max_len, E)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.projection = (
            None if config.embedding_size is None else nn.Linear(E, config.d_model)
        )

    def forward(
        self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        if segment_ids is None:
            # one segment: everything is sentence A
            segment_ids = torch.zeros_like(input_ids)
        # (B, T, E)
        x = self.token_embedding(input_ids) + self.segment_embedding(segment_ids)
        # (B, T, E) + (T, E): the same positions in every row
        x = x + self.position_embedding(input_ids.shape[1])
        x = self.dropout(self.norm(x))
        # (B, T, E) -> (B, T, C)
        return x if self.projection is None else self.projection(x)


def require_inputs(
    config: BertConfig, input_ids, segment_ids=None, attention_mask=None
) -> None:
    """Raise, naming the argument, unless the (B, T) inputs fit ``config``: ids within
    the vocabulary and the segments, no longer than max_len, and a 0/1 mask. An HF-style
    additive mask (0 and -10000) would otherwise be read backwards, without an error.

    >>> require_inputs(BertConfig.tiny(vocab_size=10), torch.tensor([[2, 7, 30]]))
    Traceback (most recent call last):
    ValueError: input_ids must be in [0, vocab_size=10), got [30]
    """
    require_ids("input_ids", input_ids, config.vocab_size, "vocab_size")
    require_context("input_ids", input_ids.shape[1], config.max_len)
    if segment_ids is not None:
        require_ids(
            "segment_ids", segment_ids, config.n_segments, "n_segments", input_ids.shape
        )
    if attention_mask is None:
        return
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            "attention_mask must have the shape of input_ids "
            f"{tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}"
        )
    if not ((attention_mask == 0) | (attention_mask == 1)).all():
        raise ValueError(
            "attention_mask must hold only 0/1 (or False/True): 1 = real token, "
            "0 = padding"
        )


def attention_mask_to_bool(attention_mask: torch.Tensor) -> torch.Tensor:
    """HF's (B, T) attention_mask, 1/True = real token, -> our (B, 1, 1, T) bool mask
    over the keys. The same as ``masks.padding_mask(lengths)`` for right padding, and
    correct for any other layout too.

    >>> attention_mask_to_bool(torch.tensor([[1, 1, 0]])).shape  # (B, 1, 1, T)
    torch.Size([1, 1, 1, 3])
    >>> attention_mask_to_bool(torch.tensor([[1, 1, 0]]))[:, 0, 0]
    tensor([[ True,  True, False]])
    """
    # (B, T) -> (B, 1, 1, T): broadcasts over heads and queries
    return attention_mask.bool()[:, None, None, :]


@dataclass
class BertOutput:
    hidden_states: torch.Tensor  # (B, T, C), the last layer's output
    # (B, C), tanh(Linear(hidden state of [CLS])): the input of NSP and classifiers
    pooled: torch.Tensor
    # n_layers + 1 tensors (B, T, C): embeddings, then each layer
    all_hidden_states: list[torch.Tensor] | None = None


class BertModel(nn.Module):
    """The BERT encoder: embeddings, n_layers post-LN blocks, and the [CLS] pooler.

    >>> model = BertModel(BertConfig.tiny(vocab_size=100))
    >>> out = model(torch.tensor([[2, 7, 3]]), return_all_hidden_states=True)
    >>> out.hidden_states.shape, out.pooled.shape, len(out.all_hidden_states)
    (torch.Size([1, 3, 128]), torch.Size([1, 128]), 3)
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        sizes = (config.d_model, config.n_heads, config.d_ff, config.dropout)
        options = {
            "activation": config.activation,
            "layer_norm_eps": config.layer_norm_eps,
        }
        # norm_first=False: BERT is post-LN, x = LN(x + sublayer(x)). ALBERT's shared
        # layers are one block listed n_layers times, its tensors applied at each layer.
        blocks = [
            TransformerBlock(*sizes, norm_first=False, **options)
            for _ in range(config.n_layers)
        ]
        self.layers = nn.ModuleList(
            [blocks[0]] * config.n_layers if config.share_layers else blocks
        )
        self.pooler = nn.Linear(config.d_model, config.d_model)
        self.apply(init_bert_weights)

    def forward(
        self,
        input_ids,
        segment_ids=None,
        attention_mask=None,
        return_all_hidden_states=False,
        causal: bool = False,
    ) -> BertOutput:
        """input_ids, segment_ids, attention_mask: (B, T); attention_mask 1/True for
        real tokens, 0 for padding. ``causal=True`` adds GPT's causal mask: position t
        reads tokens 0..t only (BERT as a next-word predictor)."""
        require_inputs(self.config, input_ids, segment_ids, attention_mask)
        x = self.embeddings(input_ids, segment_ids)  # (B, T) -> (B, T, C)
        mask = (
            None if attention_mask is None else attention_mask_to_bool(attention_mask)
        )
        all_hidden_states = [x] if return_all_hidden_states else None
        for layer in self.layers:
            # causal: a real key is read only by the queries at or after it
            x = layer(x, mask=mask, causal=causal)
            if return_all_hidden_states:
                all_hidden_states.append(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, C): position 0 holds [CLS]
        return BertOutput(
            hidden_states=x, pooled=pooled, all_hidden_states=all_hidden_states
        )


class BertMLMHead(nn.Module):
    """Transform (Linear C -> E, activation, LayerNorm), then a decoder to V logits
    whose weight IS the token embedding matrix (tied, as in BERT: one matrix both reads
    and writes tokens), with its own bias (V,). E = C for BERT; ALBERT's factorized
    embedding makes it E."""

    def __init__(self, config: BertConfig, token_embedding: nn.Embedding):
        super().__init__()
        E = config.embedding_width
        self.dense = nn.Linear(config.d_model, E)
        self.activation = ACTIVATIONS[config.activation]()
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(E, config.vocab_size)
        # before tying, so the shared matrix keeps the embedding's init
        self.apply(init_bert_weights)
        # the same Parameter: gradients from both uses add up
        self.decoder.weight = token_embedding.weight

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # (B, T, C) -> (B, T, E)
        x = self.norm(self.activation(self.dense(hidden_states)))
        return self.decoder(x)  # (B, T, E) -> (B, T, V)


@dataclass
class BertPreTrainingOutput:
    # (B, T, V) without mlm_labels; with them (N, V), only at the N labelled positions
    mlm_logits: torch.Tensor
    # (B, 2): class 0 = B follows A, 1 = B is a random sentence (HF's convention)
    nsp_logits: torch.Tensor
    hidden_states: torch.Tensor  # (B, T, C), the encoder's last layer
    # mlm_loss + nsp_loss, or whichever of them was asked for
    loss: torch.Tensor | None = None
    # cross-entropy, mean over positions whose label != -100
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None  # cross-entropy, mean over the batch


class BertForPreTraining(nn.Module):
    """BertModel + MLM head + NSP head (Linear C -> 2) on the pooled [CLS].

    Without labels the MLM head scores every position, (B, T, V). With ``mlm_labels`` it
    scores only the labelled positions, in row-major order, (N, V): the loss needs
    nothing else, and skipping the other 85% of the C x V product makes a small model's
    training step about three times faster. Give only ``mlm_labels`` for MLM-only
    training (RoBERTa); then ``loss`` is the MLM loss alone.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm_head = BertMLMHead(config, self.bert.embeddings.token_embedding)
        self.nsp_head = nn.Linear(config.d_model, 2)
        init_bert_weights(self.nsp_head)

    def forward(
        self,
        input_ids,
        segment_ids=None,
        attention_mask=None,
        mlm_labels=None,
        nsp_labels=None,
    ) -> BertPreTrainingOutput:
        """mlm_labels: (B, T), the original id at masked positions and -100 elsewhere;
        nsp_labels: (B,) in {0, 1}."""
        body = self.bert(input_ids, segment_ids, attention_mask)
        nsp_logits = self.nsp_head(body.pooled)  # (B, 2)
        mlm_loss = nsp_loss = None
        if mlm_labels is None:
            mlm_logits = self.mlm_head(body.hidden_states)  # (B, T, V)
        else:
            shape, V = input_ids.shape, self.config.vocab_size
            require_ids("mlm_labels", mlm_labels, V, "vocab_size", shape, IGNORE_INDEX)
            labelled = mlm_labels != IGNORE_INDEX  # (B, T)
            mlm_logits = self.mlm_head(body.hidden_states[labelled])  # (N, C) -> (N, V)
            mlm_loss = F.cross_entropy(mlm_logits, mlm_labels[labelled])
        if nsp_labels is not None:
            batch = input_ids.shape[:1]  # (B,)
            require_ids("nsp_labels", nsp_labels, 2, "classes", batch, IGNORE_INDEX)
            nsp_loss = F.cross_entropy(
                nsp_logits, nsp_labels, ignore_index=IGNORE_INDEX
            )
        losses = [loss for loss in (mlm_loss, nsp_loss) if loss is not None]
        loss = sum(losses) if losses else None
        return BertPreTrainingOutput(
            mlm_logits, nsp_logits, body.hidden_states, loss, mlm_loss, nsp_loss
        )


@dataclass
class ClassificationOutput:
    logits: torch.Tensor  # (B, n_classes)
    # cross-entropy, mean over the batch, when labels are given
    loss: torch.Tensor | None = None


class BertForSequenceClassification(nn.Module):
    """BertModel, dropout, and a Linear(C, n_classes) on the pooled [CLS].

    ``freeze_body=True`` is a linear probe: the body gets no gradient and stays in eval
    mode (no dropout), so only the classifier learns, on fixed features. Fine-tuning a
    pretrained model replaces its head: see ``from_body``.

    >>> classifier = BertForSequenceClassification(
    ...     BertConfig.tiny(vocab_size=100), n_classes=2, freeze_body=True
    ... )
    >>> [
    ...     name
    ...     for name, parameter in classifier.named_parameters()
    ...     if parameter.requires_grad
    ... ]
    ['classifier.weight', 'classifier.bias']
    >>> classifier(torch.tensor([[2, 7, 3]])).logits.shape
    torch.Size([1, 2])
    """

    def __init__(self, config: BertConfig, n_classes: int, freeze_body: bool = False):
        super().__init__()
        self.config = config
        self.n_classes = require_size("n_classes", n_classes, minimum=2)
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, n_classes)
        init_bert_weights(self.classifier)
        self.freeze_body = freeze_body
        self.bert.requires_grad_(not freeze_body)
        self.train()

    @classmethod
    def from_body(
        cls, body: nn.Module, n_classes: int, freeze_body: bool = False
    ) -> "BertForSequenceClassification":
        """A new classifier on a copy of ``body`` (a BertModel, or the ``.bert`` of
        BertForPreTraining or of another classifier). The pretrained model itself is
        left unchanged, so one body can seed a probe and a fine-tune."""
        body = getattr(body, "bert", body)
        if not isinstance(body, BertModel):
            raise TypeError(
                "body must be a BertModel or hold one as .bert, got "
                f"{type(body).__name__}"
            )
        model = cls(body.config, n_classes, freeze_body)
        model.bert.load_state_dict(body.state_dict())
        return model.to(body.pooler.weight.device)

    def train(self, mode: bool = True) -> "BertForSequenceClassification":
        super().train(mode)
        if self.freeze_body:
            # a frozen body gives the same features every time: no dropout noise
            self.bert.eval()
        return self

    def forward(
        self, input_ids, attention_mask=None, segment_ids=None, labels=None
    ) -> ClassificationOutput:
        """labels: (B,) class ids in [0, n_classes). The mask comes second, as in HF's
        classifier, so that the inputs ``(ids, attention_mask)`` of
        ``finetuning.fit_classifier`` land where they belong. A single sentence needs
        no segment ids."""
        # (B, C)
        pooled = self.bert(
            input_ids, segment_ids=segment_ids, attention_mask=attention_mask
        ).pooled
        logits = self.classifier(self.dropout(pooled))  # (B, C) -> (B, n_classes)
        loss = None
        if labels is not None:
            batch = input_ids.shape[:1]  # (B,)
            require_ids(
                "labels", labels, self.n_classes, "n_classes", batch, IGNORE_INDEX
            )
            loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX)
        return ClassificationOutput(logits, loss)

"""LoRA on SmolLM2-135M-Instruct: teach it to answer "Opposite of <word>?" with one
word, and check that other questions keep the answers they had.

Left alone the model answers in sentences ("The opposite of hot is cold. This is...").
The taught form is the bare word and the end of the turn. Training mixes the taught
questions with replayed ones: other questions paired with the model's own answers from
before training, so that the adapter learns the new form for this kind of question
only. Held-out words and held-out control questions measure both halves.

    >>> chat("Opposite of hot?")
    '<|im_start|>user\\nOpposite of hot?<|im_end|>\\n<|im_start|>assistant\\n'
"""

import torch

from minformers.sft import greedy_responses, sft_batch, sft_loss
from minformers.support.history import History
from minformers.train import TrainConfig, train

# (word, opposite): the first 32 teach, the last 16 are held out
OPPOSITES = [
    ("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"),
    ("light", "dark"), ("happy", "sad"), ("open", "closed"), ("early", "late"),
    ("young", "old"), ("hard", "soft"), ("rich", "poor"), ("wet", "dry"),
    ("full", "empty"), ("loud", "quiet"), ("strong", "weak"), ("thick", "thin"),
    ("high", "low"), ("clean", "dirty"), ("true", "false"), ("win", "lose"),
    ("push", "pull"), ("above", "below"), ("inside", "outside"), ("first", "last"),
    ("heavy", "light"), ("long", "short"), ("near", "far"), ("buy", "sell"),
    ("give", "take"), ("start", "finish"), ("love", "hate"), ("day", "night"),
    ("good", "bad"), ("black", "white"), ("left", "right"), ("north", "south"),
    ("friend", "enemy"), ("ancient", "modern"), ("wide", "narrow"), ("sweet", "sour"),
    ("deep", "shallow"), ("brave", "cowardly"), ("asleep", "awake"), ("arrive", "leave"),
    ("cheap", "expensive"), ("remember", "forget"), ("accept", "refuse"), ("safe", "dangerous"),
]  # fmt: skip
TAUGHT, HELD_OUT = OPPOSITES[:32], OPPOSITES[32:]
# questions of other kinds: their answers from before training are replayed in training
REPLAY = [
    "What is the largest ocean?", "Name a fruit that is yellow.", "What is 3 times 4?",
    "Who wrote Hamlet?", "What colour is the sky?", "Say thank you in Spanish.",
    "How many days are in a week?", "What is water made of?", "Name an animal that can fly.",
    "What is the boiling point of water?", "Write one word that rhymes with cat.",
    "What do cows drink?", "What is the first month of the year?", "Name a musical instrument.",
    "How many hours are in a day?", "Where do penguins live?",
]  # fmt: skip
# never trained on: their answers should not change
CONTROLS = [
    "What is the capital of France?", "Name three colours.", "What is 7 plus 5?",
    "Write a short greeting.", "What do bees make?", "How many legs does a spider have?",
    "Give me a synonym of happy.", "What is the plural of mouse?",
]  # fmt: skip
TARGETS = ("q_proj", "v_proj")  # the LoRA paper's choice: queries and values
END = "<|im_end|>"  # SmolLM2's end of a turn


def chat(question: str) -> str:
    """SmolLM2's chat format, one user turn and the start of the assistant's reply."""
    return f"<|im_start|>user\n{question}{END}\n<|im_start|>assistant\n"


def question(word: str) -> str:
    return f"Opposite of {word}?"


def ask(model, tokenizer, questions: list[str], max_new_tokens: int) -> list[str]:
    """The model's greedy replies, cut at the end of its turn."""
    prompts = [tokenizer.encode(chat(q)) for q in questions]
    (end_id,) = tokenizer.encode(END)
    with torch.no_grad():
        replies = greedy_responses(model.eval(), prompts, max_new_tokens, end_id)
    return [tokenizer.decode(reply) for reply in replies]


def reply_log_probs(model, tokenizer, questions: list[str], replies: list[str]):
    """For each question, the model's (len(reply), V) log-probabilities of the next
    token at each position of ``reply`` (read with the reply as context): how the model
    would continue a given answer, position by position."""
    prompts = [tokenizer.encode(chat(q)) for q in questions]
    answers = [tokenizer.encode(reply) for reply in replies]
    texts = [p + a for p, a in zip(prompts, answers, strict=True)]
    (end_id,) = tokenizer.encode(END)
    ids, _ = sft_batch(texts, [len(p) for p in prompts], pad_id=end_id)
    with torch.no_grad():
        log_probs = model.eval()(ids).log_softmax(-1)  # (B, T, V)
    # right padding leaves each row's own positions as they would be alone
    return [
        row[len(p) - 1 : len(p) + len(a) - 1]
        for row, p, a in zip(log_probs, prompts, answers, strict=True)
    ]


def teach_opposites(
    model,
    tokenizer,
    replayed: list[str],
    schedule: TrainConfig,
    batch_size: int = 8,
    replay_share: float = 0.5,
) -> History:
    """Train ``model`` (its trainable parameters) on batches of taught questions (the
    opposite, then the end of the turn) and, ``replay_share`` of each batch, REPLAY
    questions with ``replayed``, the model's own earlier replies to them; the loss on
    the replies only."""
    (end_id,) = tokenizer.encode(END)
    half = batch_size - round(batch_size * replay_share)  # the taught examples

    def batch_for_step(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        draw = torch.Generator().manual_seed(step)
        pairs = [TAUGHT[i] for i in torch.randint(len(TAUGHT), (half,), generator=draw)]
        others = torch.randint(len(REPLAY), (batch_size - half,), generator=draw)
        prompts = [tokenizer.encode(chat(question(word))) for word, _ in pairs]
        prompts += [tokenizer.encode(chat(REPLAY[i])) for i in others]
        replies = [tokenizer.encode(opposite) + [end_id] for _, opposite in pairs]
        replies += [tokenizer.encode(replayed[i]) for i in others]
        texts = [p + r for p, r in zip(prompts, replies, strict=True)]
        return sft_batch(texts, [len(p) for p in prompts], pad_id=end_id)

    def loss_for_batch(model, batch) -> torch.Tensor:
        ids, labels = batch
        return sft_loss(model(ids), labels)

    return train(model, batch_for_step, loss_for_batch, schedule, progress=False)

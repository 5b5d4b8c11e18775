"""How fast is a byte-level BPE written in plain Python, next to the Rust ones (HF tokenizers, tiktoken)?

Training: 133,000 characters of English (All's Well That Ends Well, the first of Shakespeare's works in alphabetical
order) to a vocab of 500 (256 bytes + 244 merges), GPT-2's regex as pretokenizer. HF `tokenizers` runs with
BpeTrainer(min_frequency=0, its default, like ours which merges pairs seen once too), ByteLevel.alphabet() as the
initial alphabet, and one thread (RAYON_NUM_THREADS=1, set before import), so both learn 244 merges from the same
pretokens. HF breaks ties between equally frequent pairs by its own rule, so the merges agree only up to the first
tie that the two rules break differently.

Encoding: the first 1,000,000 characters of the 42 works in alphabetical order, with GPT-2's vocab and merges, in
one call each. Ours is timed with a fresh pretoken cache ("cold": every distinct word is encoded once) and with the
cache filled by an earlier call ("warm"); HF tokenizers keeps its own word cache between calls, tiktoken has none.
Times are medians of REPEATS runs after one warm-up run; every ratio compares timings taken in this same run.

    .venv/bin/python benchmarks/bench_tokenizers.py
"""

import json
import os

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool

import tiktoken  # noqa: E402 (after the thread setting)
import tiktoken.load  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from minformers.bpe import ByteBPETokenizer, gpt2_token_bytes, train_bpe  # noqa: E402
from minformers.pretokenize import GPT2_PATTERN  # noqa: E402
from minformers.support import data  # noqa: E402
from minformers.support.measure import median_time  # noqa: E402

TRAIN_CHARS, VOCAB_SIZE = 133_000, 500
ENCODE_CHARS = 1_000_000
REPEATS = 3
TRAIN_GOAL_SECONDS, ENCODE_GOAL_MB_PER_S = 0.25, 2.0  # plain Python within about 4x of Rust training, 2 MB/s cold


def train_hf(text: str) -> list[tuple[bytes, bytes]]:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()  # all 256 bytes, as ours starts from
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, min_frequency=0, initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]  # [left, right] in GPT-2's byte spelling
    return [tuple(gpt2_token_bytes(part) for part in (merge.split(" ") if isinstance(merge, str) else merge))
            for merge in merges]


def hf_gpt2(encoder_json, vocab_bpe) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE.from_file(str(encoder_json), str(vocab_bpe)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def tiktoken_gpt2(encoder_json, vocab_bpe) -> tiktoken.Encoding:
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(vocab_bpe), str(encoder_json))
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})


def goal(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    works = data.shakespeare_works()
    train_text = works["alls_well_that_ends_well"][:TRAIN_CHARS]
    encode_text = "".join(works.values())[:ENCODE_CHARS]
    train_kb = len(train_text.encode("utf-8")) / 1e3
    encode_mb = len(encode_text.encode("utf-8")) / 1e6

    ours_train = median_time(lambda: train_bpe(train_text, VOCAB_SIZE), repeats=REPEATS)
    hf_train = median_time(lambda: train_hf(train_text), repeats=REPEATS)
    ours_merges, hf_merges = train_bpe(train_text, VOCAB_SIZE)[1], train_hf(train_text)
    agree = next((rank for rank, (a, b) in enumerate(zip(ours_merges, hf_merges, strict=False)) if a != b), None)

    files = data.gpt2_bpe_files()
    ours = ByteBPETokenizer.from_gpt2(*files)
    # One fresh copy per timed call, built before the clock starts, so that each call starts with an empty cache.
    fresh = iter([ByteBPETokenizer(ours.vocab, ours.merges, ours.special_tokens) for _ in range(REPEATS + 1)])
    ours_cold = median_time(lambda: next(fresh).encode(encode_text), repeats=REPEATS)
    ours_warm = median_time(lambda: ours.encode(encode_text), repeats=REPEATS)
    tiktoken_encoding, hf = tiktoken_gpt2(*files), hf_gpt2(*files)
    tiktoken_time = median_time(lambda: tiktoken_encoding.encode_ordinary(encode_text), repeats=REPEATS)
    hf_time = median_time(lambda: hf.encode(encode_text, add_special_tokens=False), repeats=REPEATS)
    reference = tiktoken_encoding.encode_ordinary(encode_text)
    assert ours.encode(encode_text) == reference, "our ids differ from tiktoken's"
    hf_same = hf.encode(encode_text, add_special_tokens=False).ids == reference

    print(f"BPE training: {train_kb:.0f} KB of All's Well That Ends Well -> vocab {VOCAB_SIZE}, 1 thread")
    print(f"  {'':<16} {'seconds':>8} {'merges':>7}")
    print(f"  {'ours':<16} {ours_train:>8.3f} {len(ours_merges):>7}")
    print(f"  {'HF tokenizers':<16} {hf_train:>8.3f} {len(hf_merges):>7}")
    print(f"  ours / HF = {ours_train / hf_train:.1f}x the time; merges identical up to rank "
          f"{len(ours_merges) if agree is None else agree}")
    print(f"  goal: ours <= {TRAIN_GOAL_SECONDS} s, measured {ours_train:.3f} s: "
          f"{goal(ours_train <= TRAIN_GOAL_SECONDS)}")
    print()
    print(f"Encoding: {encode_mb:.2f} MB of Shakespeare with GPT-2's merges (ours == tiktoken ids: checked)")
    print(f"  {'':<20} {'seconds':>8} {'MB/s':>7} {'vs tiktoken':>12} {'vs HF':>7}")
    for name, seconds in [("ours, cold cache", ours_cold), ("ours, warm cache", ours_warm),
                          ("tiktoken", tiktoken_time), ("HF tokenizers", hf_time)]:
        print(f"  {name:<20} {seconds:>8.3f} {encode_mb / seconds:>7.2f} "
              f"{tiktoken_time / seconds:>11.2f}x {hf_time / seconds:>6.2f}x")
    print(f"  (ratios are throughput / peer's throughput; HF ids == tiktoken ids: {hf_same})")
    cold_mb_per_s = encode_mb / ours_cold
    print(f"  goal: ours (cold) >= {ENCODE_GOAL_MB_PER_S} MB/s, measured {cold_mb_per_s:.2f} MB/s: "
          f"{goal(cold_mb_per_s >= ENCODE_GOAL_MB_PER_S)}")


if __name__ == "__main__":
    main()

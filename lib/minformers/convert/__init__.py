"""Weights to and from other implementations, so that outputs can be compared exactly:
one module per target.

- `pytorch`: torch.nn's MultiheadAttention, TransformerEncoderLayer and Transformer;
- `bert`: Hugging Face's BERT, ALBERT and ELECTRA;
- `gpt2`: Hugging Face's GPT-2;
- `llama`: Hugging Face's Llama, and llama.cpp's GGUF files.

The HF modules convert configs (`hf_bert_config`, `bert_config_from_hf`, ...) and map
weights through one table each (our module path -> theirs, "{i}" for a layer index),
read in both directions. The model files know nothing of HF.

    >>> pattern = key_pattern("layers.{i}.attention_norm")
    >>> pattern.match("layers.3.attention_norm.weight")[2]
    '.weight'
"""

import re


def key_pattern(template: str) -> re.Pattern:
    """ "layers.{i}.attention_norm" -> a regex matching
    "layers.3.attention_norm.weight", capturing 3 and ".weight"."""
    return re.compile(r"(\d+)".join(map(re.escape, template.split("{i}"))) + r"(\..+)$")

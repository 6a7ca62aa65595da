"""Building training data: `trex data cpt` and `trex data sft`.

The flow, one module per step: `readers` turns sources (synth folders, resource folders, optimization
model files, replay corpora, benchmark files) into documents or conversations; `normalize` and
`dedup` clean them; `decontaminate` drops anything that shares an n-gram with a benchmark question;
`tokenizer` loads or trains the tokenizer; `cpt` and `sft` tokenize, mix, pack and save the Arrow
shards; `report` writes the stats, histogram and dataset card. Every drop is counted by reason and
written to `exclusions.jsonl` (see `exclusions`).
"""

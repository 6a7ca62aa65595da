"""Solver-verified synthesis of Operations Research problems (no torch here).

`data_synth.family` is the contract every problem family implements; `data_synth.families` holds one
module per family; the pipeline samples instances, verifies each several independent ways and renders
the survivors as CPT documents, SFT samples and held-out benchmark items.
"""

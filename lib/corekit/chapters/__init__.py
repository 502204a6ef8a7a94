"""One module per chapter, named after its notebook: the protocol the notebook runs, as functions it calls.

A notebook keeps its parameters, its prose, its plots and its claims; what it computes lives here, tested. A chapter
module imports the shared wings (networks and data; the two methods and their tools) and no other chapter, except
:mod:`.two_lenses`, which compares chapter 02's and chapter 06's models and imports their modules
(``tests/test_imports.py``).

=====================================  =====================================================================
:mod:`.markov_cores`                   01: validate, identify and compare the cores of Markov-chain models
:mod:`.grokking_cores`                 02: the ACE authors' last-token protocol over checkpoints
:mod:`.grokking_scaling_law`           03: grokking-time sweeps over modulus, weight decay and seed
:mod:`.llm_agreement_axis`             04: the grammatical-number axis of a language model
:mod:`.entk_mlp_modular`               05: the two eNTK cliffs of an MLP against Fourier features
:mod:`.entk_transformer_modular`       06: per-parameter eNTK eigenvectors against Fourier features
:mod:`.entk_gemma_grammar`             07: grammar features in a language model's eNTK
:mod:`.two_lenses`                     08: ACE cores and eNTK eigenspaces compared, on two models and an LM
=====================================  =====================================================================
"""

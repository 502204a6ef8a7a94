"""One module per chapter, named after its notebook: the protocol the notebook runs, as functions it calls.

A notebook keeps its parameters, its prose and its plots; what it computes lives here, tested, and so do its claims.
Each module declares, before any run:

- ``CLAIMS``: the chapter's claims as :class:`corekit.verdicts.Spec` data (id, kind, statistic, bound, the paper's
  value, the models covered);
- ``claims(findings) -> list[Claim]``: the claims decided on what the chapter's steps returned (values, nulls, the
  computed reasons of every verdict but pass), which the notebook records with ``claims.add(...)``;
- ``check_inputs(params)``: the chapter's rules on its parameters beyond the parameters cell's (values that must
  agree, the memory a run needs), in the vocabulary of :mod:`corekit.inputs`; ``corekit run`` calls it before a
  kernel starts.

A chapter module imports the shared wings (networks and data; the two methods and their tools; the verdict
vocabulary) and no other chapter (``tests/test_imports.py``): a method two chapters need lives in a wing. A notebook
imports its own chapter module and the wings, never another chapter's module.

=====================================  =====================================================================
:mod:`.markov_cores`                   01: validate, identify and compare the cores of Markov-chain models
:mod:`.grokking_cores`                 02: the ACE authors' last-token protocol over checkpoints
:mod:`.grokking_scaling_law`           03: grokking-time sweeps over modulus, weight decay and seed
:mod:`.llm_agreement_axis`             04: the grammatical-number axis of a language model
:mod:`.entk_mlp_modular`               05: the two eNTK cliffs of an MLP against Fourier features
:mod:`.entk_transformer_modular`       06: per-parameter eNTK eigenvectors against Fourier features
:mod:`.entk_gemma_grammar`             07: grammar features in a language model's eNTK
:mod:`.two_lenses`                     08: ACE cores and eNTK eigenspaces compared, on two models and an LM
:mod:`.merging_cores`                  09: merging the cores of models trained from one initialisation
=====================================  =====================================================================
"""

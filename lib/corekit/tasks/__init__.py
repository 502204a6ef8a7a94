"""Task data, one module per task.

======================  ==========================================================================================
:mod:`.markov`          sequences from a finite Markov chain and its closed forms (chapter 01)
:mod:`.modular`         a + b mod p for transformers and MLPs, seeded splits, (train, test) datasets (02, 03, 05, 06, 08)
:mod:`.agreement`       subject-verb number agreement prompts and the margin readout (04, 08)
:mod:`.sva_sentences`   the ACE authors' agreement sentences, checked (04)
:mod:`.grammar`         grammar features on story text: contexts and UD labels (07)
:mod:`.ud`              spaCy's English Universal Dependencies pipeline (04, 07)
======================  ==========================================================================================
"""

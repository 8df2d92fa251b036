"""Parsing with rdflib without letting it rewrite literals.

rdflib, by default, replaces the lexical form of a typed literal with the canonical form of
its value: ``"01"^^xsd:integer`` becomes ``"1"``, ``"+5"`` becomes ``"5"``,
``"1"^^xsd:boolean`` becomes ``"true"`` and ``"2006-08-23Z"^^xsd:date`` loses its time
zone. Those are different RDF terms. A static triple read from Turtle would then no longer
join a streamed triple that carries the term as written (edgewave's N-Triples reader keeps
it), a binding would not show the data's term, and two distinct triples could merge into
one. rdflib also logs a traceback for every ill-typed literal (``"abc"^^xsd:integer``),
which is legal RDF and needs no traceback.

Every place edgewave parses RDF with rdflib does so inside :func:`literals_as_written`.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

import rdflib

__all__ = ["literals_as_written"]

# rdflib's switch is a module global; the lock keeps two parsing threads from restoring it
# out of order. Code that builds rdflib literals meanwhile in another thread sees it off too.
# Reentrant: a parse inside another (a document's part read while the document is) nests.
_LOCK = threading.RLock()
_TERM_LOGGER = logging.getLogger("rdflib.term")


@contextmanager
def literals_as_written() -> Iterator[None]:
    """While inside, rdflib keeps every literal's lexical form as written and stays quiet
    about ill-typed ones."""
    with _LOCK:
        normalize, level = rdflib.NORMALIZE_LITERALS, _TERM_LOGGER.level
        rdflib.NORMALIZE_LITERALS = False
        _TERM_LOGGER.setLevel(logging.ERROR)
        try:
            yield
        finally:
            rdflib.NORMALIZE_LITERALS = normalize
            _TERM_LOGGER.setLevel(level)

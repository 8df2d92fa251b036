"""RDF files named on a command line (schemas, static data, patterns), read the same way
by ``edgewave match`` and ``edgewave-cloud make-config``.

N-Triples goes through edgewave's own parser (malformed lines are reported with their line
numbers); other formats through rdflib, chosen by file extension. Every file is UTF-8 and
may start with a byte-order mark, as editors on Windows write one. A file that cannot be
read raises ``RdfFileError``, whose message names the file and says why.
"""
from __future__ import annotations

import codecs
import os
import pathlib

from .ntriples import NTriplesError, Triple, parse_lines

__all__ = ["RDF_FORMATS", "RdfFileError", "read_text", "read_triples"]

NTRIPLES_EXTENSIONS = (".nt", ".ntriples", ".nts")
RDF_FORMATS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".n3": "n3",
    ".rdf": "xml",
    ".owl": "xml",
    ".xml": "xml",
    ".jsonld": "json-ld",
    ".json": "json-ld",
    ".trig": "trig",
}


class RdfFileError(ValueError):
    """A file that cannot be used: missing, not UTF-8, unknown format, not parseable."""


def read_text(path: str | os.PathLike[str]) -> str:
    """A UTF-8 text file (a pattern, say), less a leading byte-order mark."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return fh.read()
    except OSError as exc:
        raise RdfFileError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise RdfFileError(f"{path}: not UTF-8 text ({exc.reason})") from None


def read_triples(path: str | os.PathLike[str], errors: list[NTriplesError]) -> list[Triple]:
    """The triples of an RDF file as canonical N-Triples terms.

    Malformed N-Triples lines are skipped and appended to ``errors``: the caller decides
    whether one is fatal (a schema) or only reported (static data).
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if not os.path.exists(path):
        raise RdfFileError(f"{path}: no such file")
    if ext in NTRIPLES_EXTENSIONS:
        try:
            with open(path, encoding="utf-8-sig", newline="\n") as fh:
                return list(parse_lines(fh, errors))
        except UnicodeDecodeError as exc:
            raise RdfFileError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise RdfFileError(f"{path}: {exc.strerror}") from None
    fmt = RDF_FORMATS.get(ext)
    if fmt is None:
        raise RdfFileError(f"{path}: unknown RDF format {ext!r} (use .ttl, .nt, .rdf, .owl, .n3, .trig or .jsonld)")
    import rdflib  # only here: N-Triples alone must not pay for importing it

    from .rdflib_literals import literals_as_written

    graph = rdflib.Graph()
    try:
        # Read here, not by rdflib, so that a leading UTF-8 byte-order mark is dropped
        # (rdflib's Turtle parser rejects it). Bytes: an XML file's own encoding stands.
        with open(path, "rb") as fh:
            data = fh.read()
        base = pathlib.Path(path).absolute().as_uri()   # relative IRIs resolve against the file
        with literals_as_written():
            graph.parse(data=data.removeprefix(codecs.BOM_UTF8), format=fmt, publicID=base)
    except OSError as exc:
        raise RdfFileError(f"{path}: {exc.strerror}") from None
    except Exception as exc:  # rdflib raises many types; the message is what matters
        raise RdfFileError(f"{path}: cannot parse as {fmt}: {exc}") from None
    text = graph.serialize(format="nt")
    return list(parse_lines(text.split("\n"), errors))  # not splitlines(): see ntriples

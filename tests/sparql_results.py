"""SPARQL result files (XML and JSON) as rows of canonical terms, and result comparison up to
blank-node renaming: what the W3C test harnesses compare the engine's output with."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from edgewave.shared.ntriples import make_iri, make_literal

SRX = "{http://www.w3.org/2005/sparql-results#}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
Row = tuple[tuple[str, str], ...]  # (variable, term) pairs, sorted


def expected_rows(path: Path) -> list[dict[str, str]]:
    """The solutions of a SPARQL XML results file, as canonical N-Triples terms."""
    rows = []
    for result in ET.parse(path).iter(SRX + "result"):
        row = {}
        for binding in result.findall(SRX + "binding"):
            node = binding[0]
            kind = node.tag.removeprefix(SRX)
            if kind == "uri":
                row[binding.get("name")] = make_iri(node.text or "")
            elif kind == "bnode":
                row[binding.get("name")] = "_:" + (node.text or "")
            else:
                row[binding.get("name")] = make_literal(node.text or "", node.get("datatype"), node.get(XML_LANG))
        rows.append(row)
    return rows


def same_solutions(got: list[Row], want: list[Row]) -> bool:
    """Equal as multisets, up to a one-to-one renaming of blank nodes."""
    if len(got) != len(want):
        return False
    if Counter(got) == Counter(want):
        return True
    remaining = sorted(want)

    def extend(i: int, ours: dict[str, str], theirs: dict[str, str]) -> bool:
        if i == len(got):
            return True
        for j, candidate in enumerate(remaining):
            if candidate is None or [v for v, _ in candidate] != [v for v, _ in got[i]]:
                continue
            new_ours, new_theirs, fits = dict(ours), dict(theirs), True
            for (_, a), (_, b) in zip(got[i], candidate):
                if a.startswith("_:") and b.startswith("_:"):
                    fits = new_ours.setdefault(a, b) == b and new_theirs.setdefault(b, a) == a
                else:
                    fits = a == b
                if not fits:
                    break
            if fits:
                remaining[j] = None
                if extend(i + 1, new_ours, new_theirs):
                    return True
                remaining[j] = candidate
        return False

    return extend(0, {}, {})


def expected_json_rows(path: Path) -> list[dict[str, str]]:
    """The solutions of a SPARQL JSON results file, as canonical N-Triples terms."""
    rows = []
    for binding in json.loads(path.read_text(encoding="utf-8"))["results"]["bindings"]:
        row = {}
        for name, value in binding.items():
            if value["type"] == "uri":
                row[name] = make_iri(value["value"])
            elif value["type"] == "bnode":
                row[name] = "_:" + value["value"]
            else:
                row[name] = make_literal(value["value"], value.get("datatype"), value.get("xml:lang"))
        rows.append(row)
    return rows

"""Server-side syntax highlighting of RSP-QL/SPARQL patterns: keywords, variables, IRIs, literals, comments.

A pattern is shown as text with ``<span class="hl-...">`` around its tokens; the
stylesheet colours them. No JavaScript, no build step. The tokeniser is a
single regular expression: it only colours, so anything it does not recognise
is passed through (escaped) as it is.
"""
from __future__ import annotations

import re

from markupsafe import Markup, escape

KEYWORDS = frozenset("""
REGISTER RSTREAM ISTREAM DSTREAM AS SELECT DISTINCT REDUCED CONSTRUCT ASK DESCRIBE FROM NAMED WINDOW STREAM ON
RANGE STEP SLIDE TUMBLING WHERE FILTER OPTIONAL UNION MINUS GRAPH BIND VALUES PREFIX BASE NOT EXISTS IN
ORDER BY GROUP HAVING LIMIT OFFSET ASC DESC COUNT SUM MIN MAX AVG REGEX STR LANG DATATYPE BOUND IRI URI
ISIRI ISURI ISBLANK ISLITERAL ISNUMERIC LCASE UCASE CONTAINS STRSTARTS STRENDS ABS CEIL FLOOR ROUND NOW
TRUE FALSE A
""".split())

TOKEN = re.compile(r"""
    (?P<com>\#[^\n]*)
  | (?P<str>\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<iri><[^<>"{}|^`\\\s]*>)
  | (?P<var>[?$][A-Za-z_][\w]*)
  | (?P<pn>(?:[A-Za-z][\w.-]*)?:[\w.-]*(?<!\.))
  | (?P<num>[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_]\w*)
""", re.VERBOSE)


def highlight(text: str) -> Markup:
    """``text`` as escaped HTML, its tokens wrapped in spans (hl-kw, hl-var, hl-iri, hl-pn, hl-str, hl-num, hl-com)."""
    out: list[str] = []
    pos = 0
    for m in TOKEN.finditer(text):
        out.append(str(escape(text[pos:m.start()])))
        kind = m.lastgroup
        token = m.group()
        if kind == "word":
            kind = "kw" if token == "a" or (token.upper() in KEYWORDS and token.upper() != "A") else None
        if kind is None:
            out.append(str(escape(token)))
        else:
            out.append(f'<span class="hl-{kind}">{escape(token)}</span>')
        pos = m.end()
    out.append(str(escape(text[pos:])))
    return Markup("".join(out))

"""The edgewave Rete engine (Sparkwave design). Pure computation: no I/O, no per-triple logging.

``Engine`` runs the network; ``Match`` is what it emits; ``parse_query`` (RSP-QL, see
``rspql.py``) and the query model (``Query``, ``TriplePattern``, ``WindowSpec``, ``Filter``)
describe patterns. How the parts fit: ``engine.py`` (semantics and the hot path),
``epsilon.py`` (entailment), ``alpha.py``, ``memories.py``, ``beta.py``, ``tokens.py`` and
``network.py`` (the Rete; docs/engine.md maps the papers' terms to them), ``evidence.py``
(why a match fired: ``Match.entailed``), ``describe.py`` (the compiled network as text).
"""
from .engine import Engine
from .match import Match
from .query import Filter, Query, QuerySyntaxError, TriplePattern, WindowSpec, parse_query

__all__ = ["Engine", "Match", "Query", "QuerySyntaxError", "TriplePattern", "WindowSpec", "Filter", "parse_query"]

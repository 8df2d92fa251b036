"""Per-instance evaluation: a query evaluated on each window instance as it closes
(aggregates, OPTIONAL, negation, UNION, solution modifiers, ISTREAM/DSTREAM), kept
incrementally as a Rete of its own node kinds. See docs/engine.md, "Per-instance queries".

rdflib (which parses a per-instance query's SPARQL) is imported only when such a query is
compiled, and not for the plainest (direct.py): continuous matching and `edgewave match` over
conjunctive patterns do not pay for it.
"""
from .front import InstanceQuery, parse_for_evaluation, parse_instance_query
from .reporting import REPORT_POLICIES

__all__ = ["InstanceEvaluator", "InstanceResult", "InstanceQuery", "parse_instance_query", "parse_for_evaluation",
           "REPORT_POLICIES"]


def __getattr__(name: str):
    if name in ("InstanceEvaluator", "InstanceResult"):
        from . import evaluator
        return getattr(evaluator, name)
    raise AttributeError(name)

"""Per-instance evaluation: a query evaluated on each window instance as it closes
(aggregates, OPTIONAL, negation, UNION, solution modifiers, ISTREAM/DSTREAM), kept
incrementally as a Rete of its own node kinds. See docs/engine.md, "Per-instance queries"."""
from .evaluator import REPORT_POLICIES, InstanceEvaluator, InstanceResult
from .front import InstanceQuery, parse_for_evaluation, parse_instance_query

__all__ = ["InstanceEvaluator", "InstanceResult", "InstanceQuery", "parse_instance_query", "parse_for_evaluation",
           "REPORT_POLICIES"]

"""A query's SPARQL algebra (algebra.py) compiled into a per-instance network.

The part of the query below GROUP BY (or all of it, without aggregates) becomes nodes
that follow the windows' content incrementally; what acts on the result as a whole
(expressions over aggregates, HAVING, projection, ORDER BY, DISTINCT, LIMIT/OFFSET)
becomes the read-off chain (``modifiers``). ``WINDOW w { }`` reaches this module as
``GRAPH w { }``: its patterns read window w's content.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Optional

from .. import filters
from .aggregate_node import AggregateNode, AggregateSpec
from .aggregates import AGGREGATES, BY_VALUE
from .algebra import Iri, Lit, Op
from .constant_node import ConstantNode
from .expressions import UnsupportedQuery, expression, term, text_of
from .extend_node import ExtendNode
from .filter_node import FilterNode
from .join_aggregate_node import JoinAggregateNode
from .join_node import JoinNode
from .modifiers import ReadOff
from .negative_node import EXISTS, MINUS, NOT_EXISTS, NegativeNode
from .optional_node import OptionalNode
from .pattern_node import PatternNode
from .solutions import Node, Row
from .star_node import StarNode
from .union_node import UnionNode

_MODIFIERS = ("Slice", "Project", "Distinct", "Reduced", "OrderBy")


@dataclass
class Network:
    """The compiled query: where triples enter, where the result is read."""
    patterns: list[PatternNode] = field(default_factory=list)
    constants: list[ConstantNode] = field(default_factory=list)
    root: Optional[Node] = None  # the incremental part's top
    aggregate: Optional[AggregateNode] = None  # the root, when the query aggregates
    read_off: Optional[ReadOff] = None

    def describe(self) -> list[str]:
        """The node tree, root first, inputs indented beneath, then the read-off steps."""
        lines: list[str] = []

        def walk(node: Node, depth: int) -> None:
            lines.append("  " * depth + node.label())
            for child in node.inputs:
                walk(child, depth + 1)
        walk(self.root, 1)
        lines.append("  read off at close: " + (", ".join(self.read_off.described) or "the solutions as they are"))
        return lines


def _text_of(expr: Any) -> str:
    """A FILTER's text as SPARQL (in errors and ``--explain``)."""
    try:
        return text_of(expression(expr))[:200]
    except UnsupportedQuery:
        return "(an expression with EXISTS)"


class Compiler:
    def __init__(self, windows: dict[str, Any], default_dataset: Optional[str]):
        self.windows = windows
        self.default_dataset = default_dataset  # what patterns outside any WINDOW read
        self.network = Network()

    # ---------------------------------------------------------------- the query
    def query(self, algebra: Op) -> Network:
        if algebra.name != "SelectQuery":
            raise UnsupportedQuery(f"{algebra.name} is not supported: a query is a SELECT query")
        modifiers: list[Op] = []
        node = algebra.p
        while node.name in _MODIFIERS or (node.name in ("Extend", "Filter") and _aggregates_below(node)):
            modifiers.append(node)
            node = node.p
        if node.name == "Join" and _aggregates_below(node):
            raise UnsupportedQuery("VALUES after GROUP BY is not supported")
        network = self.network
        if node.name == "AggregateJoin":
            network.aggregate = self.aggregate(node)
            network.root = network.aggregate
        else:
            network.root = self.pattern(node, self.default_dataset)
        read_off = ReadOff(network.root.variables)
        for modifier in reversed(modifiers):
            self.modifier(read_off, modifier)
        network.read_off = read_off
        return network

    def modifier(self, read_off: ReadOff, node: Op) -> None:
        name = node.name
        if name == "Extend":
            read_off.extend(str(node.var), expression(node.expr))
        elif name == "Filter":
            read_off.filter(self.plain_expression(node.expr), _text_of(node.expr))
        elif name == "Project":
            read_off.project([str(v) for v in node.PV])
        elif name == "Distinct":
            read_off.distinct()
        # REDUCED permits removing duplicates; here it removes none
        elif name == "OrderBy":
            conditions = []
            for condition in node.expr:
                if isinstance(condition, Op) and condition.name == "OrderCondition":
                    conditions.append((expression(condition.expr), condition.order == "DESC"))
                else:
                    conditions.append((expression(condition), False))
            read_off.order_by(conditions)
        elif name == "Slice":
            read_off.slice(node.start or 0, node.length)

    def aggregate(self, node: Op) -> AggregateNode:
        group = node.p
        child = self.pattern(group.p, self.default_dataset)
        key_trees = [expression(key) for key in group.expr or ()]
        aggregates = []  # (function, distinct, by_value, argument tree or None, result variable, separator)
        for aggregate in node.A:
            function = aggregate.name[len("Aggregate_"):]
            if function not in AGGREGATES:
                raise UnsupportedQuery(f"aggregate {function.upper()} is not supported")
            distinct = aggregate.get("distinct") == "DISTINCT"
            tree = expression(aggregate.vars) if aggregate.vars != "*" else None
            separator = str(aggregate.separator) if aggregate.get("separator") is not None else " "
            aggregates.append((function, distinct, function in BY_VALUE and not distinct, tree,
                               str(aggregate.res), separator))
        if isinstance(child, JoinNode):
            fused = self.join_aggregate(child, key_trees, aggregates, implicit=not group.expr)
            if fused is not None:
                return fused
        keys = _compiled_keys(key_trees, child.slots, child.slots)
        specs = _specs(aggregates, child.slots, child.slots)
        return AggregateNode(child, keys, specs, implicit=not group.expr)

    def join_aggregate(self, join: JoinNode, key_trees: list, aggregates: list,
                       implicit: bool) -> Optional[JoinAggregateNode]:
        """The join and the aggregate above it as one node (``join_aggregate_node``) when one
        side (K) holds every variable the group keys read and the other (A) every variable
        the aggregate arguments read, the two sides sharing only variables bound on both
        (the join key); None otherwise. ``COUNT(DISTINCT *)``, whose value is the whole
        joined solution, keeps the two nodes."""
        pairing = join.pairing
        if pairing.checks or not pairing.keyed:
            return None
        left, right = join.inputs
        layout = join.slots
        key_vars = set().union(*(filters.variables_of(t) for t in key_trees)) & set(layout)
        plain_keys = {t[1] for t in key_trees if t[0] == "var"}
        argument_vars: set = set()
        for function, distinct, by_value, tree, _, _ in aggregates:
            if tree is None:
                if distinct:
                    return None
                continue
            if function == "Sample" and tree[0] == "var" and tree[1] in plain_keys and tree[1] in layout:
                continue  # read off the group's key (AggregateNode), not from a solution
            argument_vars |= filters.variables_of(tree) & set(layout)
        for a_side, k_side, a_is_left in ((left, right, True), (right, left, False)):
            if not key_vars <= set(k_side.slots) or not argument_vars <= set(a_side.slots):
                continue
            keys = _compiled_keys(key_trees, k_side.slots, layout)
            layout_key_slots = [getattr(k, "slot", None) for k in keys]
            for k, tree in zip(keys, key_trees):
                if tree[0] == "var" and tree[1] in k_side.slots:
                    k.slot = k_side.slots[tree[1]]  # the fused node reads the K solution's slot
            specs = _specs(aggregates, a_side.slots, layout)
            a_key = pairing.left_key if a_is_left else pairing.right_key
            k_key = pairing.right_key if a_is_left else pairing.left_key
            return JoinAggregateNode(a_side, k_side, a_is_left, a_key, k_key, keys, specs, implicit,
                                     layout_key_slots, pairing.keyed)
        return None

    # ---------------------------------------------------------------- graph patterns
    def pattern(self, node: Op, dataset: Optional[str]) -> Node:
        name = node.name
        if name == "BGP":
            return self.bgp(node.triples, dataset)
        if name == "Join":
            left, right = self.pattern(node.p1, dataset), self.pattern(node.p2, dataset)
            if _is_unit(left):
                self._forget(left)
                return right
            if _is_unit(right):
                self._forget(right)
                return left
            return JoinNode(left, right)
        if name == "LeftJoin":
            left, right = self.pattern(node.p1, dataset), self.pattern(node.p2, dataset)
            optional = OptionalNode(left, right)
            if node.expr is not None and not (isinstance(node.expr, Op) and node.expr.name == "TrueFilter"):
                optional.bind_condition(filters.compile_filter(self.plain_expression(node.expr),
                                                               _text_of(node.expr)).bind)
            return optional
        if name == "Minus":
            return NegativeNode(self.pattern(node.p1, dataset), self.pattern(node.p2, dataset), MINUS)
        if name == "Union":
            return UnionNode(self.pattern(node.p1, dataset), self.pattern(node.p2, dataset))
        if name == "Filter":
            return self.filter(node, dataset)
        if name == "Extend":
            child = self.pattern(node.p, dataset)
            variable = str(node.var)
            if variable in child.slots:
                raise UnsupportedQuery(f"BIND assigns ?{variable}, which is already bound in its group")
            tree = expression(node.expr)
            return ExtendNode(child, variable, lambda slots: filters.compile_term(tree, slots))
        if name == "Graph":
            if not isinstance(node.term, Iri):
                raise UnsupportedQuery("WINDOW (or GRAPH) with a variable is not supported; name a declared window")
            window = term(node.term)
            if window not in self.windows:
                declared = ", ".join(self.windows) or "none"
                raise UnsupportedQuery(f"window {window} is not declared with FROM NAMED WINDOW (declared: {declared})")
            return self.pattern(node.p, window)
        if name == "ToMultiSet":
            if node.p.name != "values":
                raise UnsupportedQuery("subqueries are not supported")
            return self.values(node.p)
        if name in _MODIFIERS or name in ("AggregateJoin", "Group"):
            raise UnsupportedQuery("subqueries are not supported")
        raise UnsupportedQuery(f"{name} is not supported")

    def bgp(self, triples: list, dataset: Optional[str]) -> Node:
        if not triples:
            return self._unit()
        nodes = []
        for triple in triples:
            try:
                nodes.append(PatternNode(tuple(term(t) for t in triple), dataset))
            except UnsupportedQuery:
                raise UnsupportedQuery("property paths are not supported; write one triple pattern per step") from None
        self.network.patterns.extend(nodes)
        # join in an order where each pattern shares a variable with those before it, if it can
        ordered = [nodes.pop(0)]
        bound = set(ordered[0].variables)
        while nodes:
            pick = next((n for n in nodes if bound & set(n.variables)), nodes[0])
            nodes.remove(pick)
            ordered.append(pick)
            bound |= set(pick.variables)
        star = _star_run(ordered)
        result: Node = StarNode(ordered[:star[0]], star[1]) if star else ordered[0]
        for node in ordered[star[0] if star else 1:]:
            result = JoinNode(result, node)
        return result

    def filter(self, node: Op, dataset: Optional[str]) -> Node:
        plain, negations = [], []
        for conjunct in _conjuncts(node.expr):
            if isinstance(conjunct, Op) and conjunct.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
                negations.append((conjunct.graph, EXISTS if conjunct.name == "Builtin_EXISTS" else NOT_EXISTS))
            elif (isinstance(conjunct, Op) and conjunct.name == "UnaryNot"
                  and isinstance(conjunct.expr, Op) and conjunct.expr.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS")):
                inner = conjunct.expr
                negations.append((inner.graph, NOT_EXISTS if inner.name == "Builtin_EXISTS" else EXISTS))
            else:
                plain.append(conjunct)
        result = self.pattern(node.p, dataset)
        for graph, kind in negations:
            inner_filter, graph = _top_filter(graph)
            negative = NegativeNode(result, self.pattern(graph, dataset), kind)
            if inner_filter is not None:
                negative.bind_condition(filters.compile_filter(expression(inner_filter), _text_of(inner_filter)).bind)
            result = negative
        if plain:
            tree = expression(plain[0])
            for more in plain[1:]:
                tree = ("and", tree, expression(more))
            result = FilterNode(result, filters.compile_filter(tree, _text_of(node.expr)).bind, _text_of(node.expr))
        return result

    def plain_expression(self, expr: Any):
        if _mentions_exists(expr):
            raise UnsupportedQuery("EXISTS is not supported here; write FILTER EXISTS { ... } in a group")
        return expression(expr)

    def values(self, node: Op) -> Node:
        rows = node.res or []
        variables = list(dict.fromkeys(str(v) for row in rows for v in row))
        table = [tuple(_value_term(row.get(v)) for v in variables) for row in rows]
        constant = ConstantNode(variables, table)
        self.network.constants.append(constant)
        return constant

    def _unit(self) -> ConstantNode:
        unit = ConstantNode((), [()])
        self.network.constants.append(unit)
        return unit

    def _forget(self, node: Node) -> None:
        self.network.constants.remove(node)


def _star_run(ordered: list[PatternNode]) -> Optional[tuple[int, str]]:
    """How many of the first patterns form a star (``star_node``), and on which variable:
    three or more, each sharing with those before it exactly one variable, the same for
    all (each pattern binds all its variables, so that is the join node's key); None when
    fewer. Two make one join node, whose one memory a star would not save."""
    if len(ordered) < 3:
        return None
    shared = set(ordered[0].variables) & set(ordered[1].variables)
    if len(shared) != 1:
        return None
    variable = next(iter(shared))
    bound = set(ordered[0].variables) | set(ordered[1].variables)
    n = 2
    while n < len(ordered) and set(ordered[n].variables) & bound == {variable}:
        bound |= set(ordered[n].variables)
        n += 1
    return (n, variable) if n >= 3 else None


def _compiled_keys(trees: list, slots: dict[str, int], layout: dict[str, int]) -> list:
    """GROUP BY keys over rows of ``slots``; a plain variable's key carries its slot in
    ``layout`` (the aggregated rows' layout), where the aggregate node looks for SAMPLE of
    a key."""
    keys = []
    for tree in trees:
        compiled = filters.compile_term(tree, slots)
        if tree[0] == "var" and tree[1] in layout:
            compiled.slot = layout[tree[1]]  # a plain variable: the node reads the slot
        keys.append(compiled)
    return keys


def _specs(aggregates: list, slots: dict[str, int], layout: dict[str, int]) -> list[AggregateSpec]:
    """The aggregates' specs, their arguments over rows of ``slots`` (their ``reads`` too);
    a plain variable's argument carries its slot in ``layout`` (SAMPLE of a GROUP BY key)."""
    specs = []
    for function, distinct, by_value, tree, variable, separator in aggregates:
        argument, reads = None, None
        if tree is not None:
            argument = _value_of(tree, slots) if by_value else filters.compile_term(tree, slots)
            reads = sorted(slots[v] for v in filters.variables_of(tree) if v in slots)
            if not by_value and tree[0] == "var" and tree[1] in layout:
                argument.slot = layout[tree[1]]  # a plain variable (SAMPLE of a GROUP BY key)
        specs.append(AggregateSpec(function, distinct, argument, variable, separator, by_value, reads))
    return specs


def _value_of(tree, slots: dict[str, int]):
    """An aggregate argument as a Python value, None where it is an error."""
    compute = filters.compile_value(tree, slots)
    failures = filters.EVAL_FAILURES

    def value(row):
        try:
            return compute(row)
        except failures:
            return None
    if (tree[0] == "cast" and tree[1] == _XSD_DECIMAL and tree[2][:2] == ("call", "STR") and len(tree[2][2]) == 1
            and tree[2][2][0][0] == "var" and tree[2][2][0][1] in slots):
        return _decimal_of_str(slots[tree[2][2][0][1]], value)
    if tree[0] == "var" and tree[1] in slots:
        return _decimal_of_term(slots[tree[1]], value)
    return value


_XSD_DECIMAL = filters.XSD_NS + "decimal"
_DECIMAL_SUFFIX = f'"^^<{_XSD_DECIMAL}>'
_DECIMAL_LEXICAL = filters._DECIMAL_RE.match


def _decimal_of_str(slot: int, general: Callable[[Row], Any]) -> Callable[[Row], Any]:
    """``xsd:decimal(STR(?v))``, the usual way to sum or average a number written under a
    datatype of its own (a currency, a unit): for a literal without escapes whose lexical
    form is a decimal, the ``Decimal`` the cast gives (STR is the lexical form, the cast
    strips it and reads it as ``filters._typed_value`` does); anything else goes through
    ``general``, the compiled expression, which decides the value or the error."""
    def value(row):
        term = row[slot]
        if term.__class__ is str and term[:1] == '"' and "\\" not in term:
            lexical = term[1:term.rfind('"')].strip()
            # digits with at most one point (the usual form) without the regular expression
            if (lexical.isascii() and lexical.replace(".", "", 1).isdigit()) or _DECIMAL_LEXICAL(lexical):
                return Decimal(lexical)
        return general(row)
    return value


def _decimal_of_term(slot: int, general: Callable[[Row], Any]) -> Callable[[Row], Any]:
    """A variable's value: an ``xsd:decimal`` literal without escapes whose lexical form is
    a decimal read straight to its ``Decimal`` (as ``filters._typed_value`` reads it),
    anything else by ``general``."""
    suffix = _DECIMAL_SUFFIX
    cut = -len(suffix)

    def value(row):
        term = row[slot]
        if term.__class__ is str and term.endswith(suffix) and term[:1] == '"' and "\\" not in term:
            lexical = term[1:cut]
            if (lexical.isascii() and lexical.replace(".", "", 1).isdigit()) or _DECIMAL_LEXICAL(lexical):
                return Decimal(lexical)
        return general(row)
    return value


def _value_term(value: Any) -> Optional[str]:
    """A VALUES cell: a term, or None for UNDEF (which the algebra gives as something else)."""
    if isinstance(value, (Iri, Lit)):
        return term(value)
    return None


def _top_filter(pattern: Op) -> tuple[Any, Op]:
    """An EXISTS group's own FILTER (through its WINDOW and an empty join) and the pattern
    without it: the negative node tests it on the outer solution merged with the inner one,
    which is what substituting the outer solution into the group means for it."""
    if pattern.name == "Filter" and not _mentions_exists(pattern.expr):
        return pattern.expr, pattern.p
    if pattern.name == "Graph":
        expr, inner = _top_filter(pattern.p)
        if expr is not None:
            return expr, Op("Graph", term=pattern.term, p=inner)
    if pattern.name == "Join":
        for unit, other in ((pattern.p1, pattern.p2), (pattern.p2, pattern.p1)):
            if unit.name == "BGP" and not unit.triples:
                return _top_filter(other)
    return None, pattern


def _is_unit(node: Node) -> bool:
    return isinstance(node, ConstantNode) and not node.variables and node.rows == [()]


def _conjuncts(expr: Any) -> list:
    if isinstance(expr, Op) and expr.name == "ConditionalAndExpression":
        out = _conjuncts(expr.expr)
        for other in expr.other or ():
            out.extend(_conjuncts(other))
        return out
    return [expr]


def _mentions_exists(expr: Any) -> bool:
    if isinstance(expr, Op):
        if expr.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
            return True
        return any(_mentions_exists(v) for k, v in expr.items() if k != "_vars")
    if isinstance(expr, list):
        return any(_mentions_exists(v) for v in expr)
    return False


def _aggregates_below(node: Any) -> bool:
    if isinstance(node, Op):
        if node.name == "AggregateJoin":
            return True
        return any(_aggregates_below(node.get(k)) for k in ("p", "p1", "p2"))
    return False

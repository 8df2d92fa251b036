"""SPARQL's ORDER BY order of terms (15.1), as a sort key; MIN and MAX use it too.

Unbound < blank nodes < IRIs < literals. Literals of comparable types (numbers, strings,
booleans, date-times) compare by value; literals of different types order by a fixed
rank of their type, then lexically: SPARQL leaves that order to the implementation.
"""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Optional

from ....shared.ntriples import is_blank, is_iri, is_literal
from ..filters import Date, LangString, Single, term_value


def order_key(term: Optional[str]) -> tuple:
    if term is None:
        return (0,)
    if is_blank(term):
        return (1, term)
    if is_iri(term):
        return (2, term)
    if not is_literal(term):  # a quoted triple
        return (3, term)
    try:
        value: Any = term_value(term)
    except Exception:  # an ill-typed literal orders by its text
        return (4, 9, 0, term)
    t = type(value)
    if t is int or t is Decimal or t is float or t is Single:
        if value != value:  # NaN: after every other number
            return (4, 0, 1, term)
        return (4, 0, 0, value, term)
    if t is bool:
        return (4, 1, value, term)
    if t is str:
        return (4, 2, value, term)
    if t is LangString:
        return (4, 3, value.lexical, value.lang, term)
    if t is datetime:
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return (4, 4, moment.timestamp(), term)
    if t is Date:
        return (4, 5, term)
    return (4, 9, 0, term)


class Descending:
    """A key that sorts in reverse (for MAX's heap)."""
    __slots__ = ("key",)

    def __init__(self, key: tuple):
        self.key = key

    def __lt__(self, other: "Descending") -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and other.key == self.key

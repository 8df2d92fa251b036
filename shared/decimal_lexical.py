"""The one xsd:decimal lexical form edgewave writes for a number.

Firmware (simulated and real, through the mapping compiler) and anything else that turns a
float into an ``xsd:decimal`` literal use this, so the same reading is the same term,
whichever path it took: the shortest form that reads back to the same float, with no
exponent and no trailing ``.0`` (``2480.0`` -> ``"2480"``, ``63.5`` -> ``"63.5"``).
"""
from __future__ import annotations


def decimal_lexical(value: float) -> str:
    """The shortest xsd:decimal lexical form of a float: no exponent, no trailing ``.0``."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        text = f"{float(value):.15f}".rstrip("0")
    if text.endswith(".0"):
        text = text[:-2]
    text = text.rstrip(".")
    return "0" if text in ("-0", "") else text

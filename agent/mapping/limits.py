"""How much one message may hold before a compiled mapping reads it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PayloadLimits:
    """Bounds checked before (or, for triples, while) a payload is mapped.

    The defaults follow the agent's N-Triples input (16 kB, 256 triples a message): a
    device payload is a few hundred bytes, a SenML pack a few dozen records.
    """

    max_bytes: int = 16384
    max_depth: int = 16          # nested arrays and objects
    max_entries: int = 1024      # array items plus object members (an upper bound counted before parsing)
    max_triples: int = 256       # triples one message may yield

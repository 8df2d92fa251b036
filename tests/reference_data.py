"""Where the public reference data is (see docs/testing.md and scripts/fetch-reference-data.py).

In this order: the directory named by ``EDGEWAVE_REFERENCE_DATA`` (it must then exist),
``var/reference-data`` in the checkout (what the fetch script fills or links), and
a ``shared/data`` directory beside the checkout. None when there is none:
the tests that need it then skip. When there is one, a test marked ``reference_data``
that skips is reported as a failure instead (tests/conftest.py).
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV = "EDGEWAVE_REFERENCE_DATA"
IN_CHECKOUT = REPO_ROOT / "var" / "reference-data"
BESIDE_CHECKOUT = REPO_ROOT.parent / "shared" / "data"


def reference_data_dir() -> Path | None:
    named = os.environ.get(ENV)
    if named:
        return Path(named)
    for candidate in (IN_CHECKOUT, BESIDE_CHECKOUT):
        if candidate.is_dir():
            return candidate
    return None


def where() -> str:
    """For skip messages: where the data was looked for."""
    return (f"${ENV}, var/reference-data or beside the checkout; "
            "scripts/fetch-reference-data.py fetches it")

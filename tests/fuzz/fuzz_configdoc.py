"""Fuzz target: gateway config documents and their signed envelopes.

The first byte picks what the rest is:

- ``E``: an envelope payload for ``verify_envelope(payload, key, gateway)``;
- ``T`` / ``t``: a TriG / Turtle document for ``load_config_document``;
- ``S``: a TriG document (the input as UTF-8, invalid bytes replaced: the cloud signs text
  it read as UTF-8) signed with ``sign_envelope`` and verified back, which must give the
  document unchanged, then loaded.

Documented error: ``ConfigRejected``.
"""
from __future__ import annotations

import rdflib.plugins.parsers.notation3  # noqa: F401  rdflib loads its parsers lazily; imported
import rdflib.plugins.parsers.trig  # noqa: F401       here, run.py instruments them for coverage
import rdflib.plugins.serializers.nt  # noqa: F401

from edgewave.shared.configdoc import ConfigRejected, load_config_document, sign_envelope, verify_envelope

from fuzzlib import guarded, mode_and_payload, text_of

KEY = b"fuzz-key"
GATEWAY = "gw1"

def _one(data: bytes) -> None:
    mode, payload = mode_and_payload(data, "ETtS")
    try:
        if mode == "E":
            verify_envelope(payload, KEY, GATEWAY)
        elif mode in "Tt":
            load_config_document(text_of(payload), "trig" if mode == "T" else "turtle")
        else:
            document = payload.decode("utf-8", "replace")
            envelope = verify_envelope(sign_envelope(GATEWAY, 7, document, "trig", KEY), KEY, GATEWAY)
            assert (envelope.document, envelope.version, envelope.format) == (document, 7, "trig")
            load_config_document(envelope.document, envelope.format)
    except ConfigRejected:
        pass


TestOneInput = guarded(_one)

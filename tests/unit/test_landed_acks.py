"""The landed acknowledgement's wire form (shared/landed_acks.py): keys the agent makes and
parses back, what ingest echoes, and acknowledgements read within bounds."""
from __future__ import annotations

import json

import pytest

from edgewave.shared.bounded_json import PayloadError
from edgewave.shared.landed_acks import (MAX_KEYS_PER_MESSAGE, decode_landed, echoable, encode_landed, message_key,
                                         parse_message_key)


def test_a_key_names_the_outbox_and_its_range_of_rows():
    key = message_key(0xBEEF, 12, 40)
    assert key == b"beef:12-40"
    assert parse_message_key(key.decode()) == (0xBEEF, 12, 40)


@pytest.mark.parametrize("text", ["", "beef", "beef:12", "beef:40-12", "xyz:1-2", "beef:1-2 ", "beef:-1-2",
                                  "b" * 17 + ":1-2", "beef:" + "9" * 20 + "-1"])
def test_anything_else_is_not_a_key(text):
    assert parse_message_key(text) is None


def test_ingest_echoes_only_short_printable_ascii():
    assert echoable(b"beef:1-2") == "beef:1-2"
    assert echoable(None) is None and echoable(b"") is None
    assert echoable(b"a b") is None and echoable(b"\xff") is None and echoable(b"x" * 65) is None


def test_a_large_group_is_split_and_reads_back():
    keys = [f"a:{i}-{i}" for i in range(MAX_KEYS_PER_MESSAGE * 2 + 3)]
    messages = list(encode_landed(keys))
    assert len(messages) == 3
    assert [k for m in messages for k in decode_landed(m)] == keys


@pytest.mark.parametrize("payload", [b"", b"[]", b'{"landed": "a:1-1"}', b'{"landed": [1]}', b"\xff",
                                     b'{"landed": [[["a"]]]}', json.dumps({"landed": ["x" * 200_000]}).encode()])
def test_a_bad_acknowledgement_is_refused_with_a_reason(payload):
    with pytest.raises(PayloadError):
        decode_landed(payload)

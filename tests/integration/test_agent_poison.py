"""Hostile input through the real entry points: a poisoned sensor message or config envelope
is counted, acknowledged (a config one with a rejection and its reason), and the agent
goes on matching; nothing is delivered again after a restart."""
from __future__ import annotations

import pytest
from agent_harness import (ALARM, EX, GATEWAY, KEY, XSD, AgentProcess, CloudWatcher, Publisher, alarm,
                           config_document, push_config, wait_for)

from edgewave.shared import configdoc, topics

HEAD = f"@prefix ew: <https://edgewave.dev/ns#> .\n@prefix ex: <{EX}> .\n"


@pytest.fixture
def rig(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    sensors = Publisher(mqtt_broker, "sensors")
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()   # default input/config limits
    push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
    assert watcher.wait_ack(1)["status"] == "applied"
    yield agent, watcher, sensors, cloud
    agent.stop()
    for c in (watcher, sensors, cloud):
        c.close()


class Alarms:
    """Valid alarms, one after each hostile message: each must come back as a match."""

    def __init__(self, sensors: Publisher, watcher: CloudWatcher) -> None:
        self.sensors, self.watcher, self.sent = sensors, watcher, 0

    def still_matching(self, after: str) -> None:
        self.sent += 1
        self.sensors.publish("ew/in/alarm/s1", alarm(self.sent))
        wait_for(lambda: f'"{self.sent}"^^<{XSD}integer>' in self.levels(), 30,
                 f"the match of a valid alarm sent after {after}")

    def levels(self) -> list[str]:
        """The level terms of the alarm matches (as written: one has 5,000 digits)."""
        return [b["value"] for e in self.watcher.matches("alarm") for b in e["bindings"] if b["variable"] == "level"]


def latest_counters(watcher: CloudWatcher, want: dict[str, int], what: str) -> dict:
    """The counters of the newest status message on the cloud broker, once they show ``want``."""
    def current() -> dict | None:
        with watcher.lock:
            statuses = [s for s in watcher.statuses if s.get("state") == "online" and "counters" in s]
        counters = statuses[-1]["counters"] if statuses else {}
        return counters if all(counters.get(k) == v for k, v in want.items()) else None
    return wait_for(current, 30, lambda: f"status counters {want} ({what}); last: "
                    f"{watcher.statuses[-1].get('counters') if watcher.statuses else None}")


def sensor_poison() -> list[tuple[str, str, bytes]]:
    """(name, expected counter, payload) for every hostile sensor message."""
    nt = f"<{EX}a> <{EX}p> "
    return [
        ("100 nested quoted triples", "quoted_too_deep",
         (nt + "<< " * 100 + f"<{EX}s> <{EX}p> <{EX}o>" + " >>" * 100 + " .\n").encode()),
        ("5,000 nested quoted triples, never closed", "quoted_too_deep", (nt + "<< " * 5000).encode()),
        ("a lone surrogate escape in a literal", "malformed", (nt + '"a\\ud800b" .\n').encode()),
        ("NUL bytes", "malformed", b"\x00" * 64),
        ("a NUL byte in an IRI", "malformed", f"<{EX}a\x00> <{EX}p> <{EX}o> .\n".encode()),
        ("invalid UTF-8", "malformed", nt.encode() + b'"\xff\xfe\xc3" .\n'),
        ("a payload over the size limit", "oversized", (nt + '"' + "y" * 20_000 + '" .\n').encode()),
        ("a line of 1 MB", "oversized", (nt + '"' + "y" * 1_000_000 + '" .\n').encode()),
        ("more triples than allowed (300 short ones, 7 kB)", "too_many_triples",
         "".join(f"<u:{i}> <u:p> <u:v> .\n" for i in range(300)).encode()),
    ]


def test_poisoned_sensor_messages_are_counted_dropped_and_not_delivered_again(rig):
    agent, watcher, sensors, cloud = rig
    alarms = Alarms(sensors, watcher)
    poison = sensor_poison()
    expected: dict[str, int] = {}
    for name, reason, payload in poison:
        sensors.publish("ew/in/alarm/s1", payload)
        expected[reason] = expected.get(reason, 0) + 1
        alarms.still_matching(name)
        assert agent.proc.poll() is None, f"agent died on {name}"

    # A 5,000-digit integer is valid RDF: it completes the pattern and goes up as written.
    digits = "9" * 5000
    sensors.publish("ew/in/alarm/s1", (f'<{EX}big> <{EX}alarmLevel> "{digits}"^^<{XSD}integer> .\n'
                                       f"<{EX}big> <{EX}raisedBy> <{EX}s1> .\n").encode())
    alarms.still_matching("a 5,000-digit integer")
    assert f'"{digits}"^^<{XSD}integer>' in alarms.levels()

    sent = len(poison) + 1 + alarms.sent
    counters = latest_counters(watcher, {**expected, "messages_in": sent}, "every poisoned message counted once")
    assert counters["decoder_error"] == 0 and counters["handler_error"] == 0
    assert counters["matches"] == alarms.sent + 1          # every valid alarm and the 5,000-digit one
    log = agent.log()
    assert "Traceback" not in log
    assert log.count("input rejected") == 1        # one line a minute per sensor, whatever the reason

    # Everything was acknowledged: after a restart the local broker delivers none of it again.
    assert agent.stop() == 0
    agent.start()
    alarms.still_matching("the restart")
    wait_for(lambda: agent.counters().get("messages_in") == 1 and agent.counters(), 20,
             "only the new alarm handled after the restart")
    assert all(agent.counters()[reason] == 0 for reason in expected)


def envelope(version: int, document: str, *, key: str = KEY) -> bytes:
    return configdoc.sign_envelope(GATEWAY, version, document, "trig", key)


def test_poisoned_config_envelopes_are_rejected_with_reasons(rig):
    agent, watcher, sensors, cloud = rig
    alarms = Alarms(sensors, watcher)
    config_topic = topics.config_topic(GATEWAY)
    deep_json = (b'{"gateway":"gw1","version":11,"format":"trig","signature":"x","document":'
                 + b"[" * 100_000 + b"]" * 100_000 + b"}")
    long_version = (b'{"gateway":"gw1","version":' + b"9" * 5000
                    + b',"format":"trig","document":"","signature":"x"}')
    not_utf8 = b'{"gateway":"gw1","version":15,"format":"trig","document":"\xff\xfe","signature":"x"}'
    surrogate = HEAD + 'ew:static { ex:a ex:p "a\\ud800b" . }\n'
    cases = [
        # (version in the ack, payload, counter, what the reason says)
        (11, deep_json, "config_rejected_envelope_malformed", "nesting depth"),
        (None, long_version, "config_rejected_envelope_malformed", "5000 digits"),
        (13, envelope(13, HEAD + "ew:static { ex:a ex:p " + "0 " * 2_500_000 + ". }\n"),
         "config_rejected_envelope_oversized", "envelope too large"),
        (14, envelope(14, HEAD + "ew:static { ex:a ex:p ex:b . }\n# " + "x" * 400_000 + "\n"),
         "config_rejected_document_oversized", "document too large"),
        (15, not_utf8, "config_rejected_envelope_malformed", "not UTF-8"),
        (16, envelope(16, HEAD + "ew:static { ex:a ex:p " + "[ ex:p " * 100_000 + "ex:b" + " ]" * 100_000
                      + " . }\n"), "config_rejected_document_oversized", "document too large"),
        (17, envelope(17, HEAD + "ew:static { ex:a ex:p " + "(" * 100_000 + ")" * 100_000 + " . }\n"),
         "config_rejected_document_too_deep", "nested too deeply: 100001 levels"),
        (18, envelope(18, HEAD + "ew:static { ex:a ex:p " + "[ ex:p " * 40 + "ex:b" + " ]" * 40 + " . }\n"),
         "config_rejected_document_too_deep", "nested too deeply: 41 levels"),
        (19, envelope(19, HEAD + "ew:static { ex:a ex:p ( " + "0 " * 30_000 + ") . }\n"),
         "config_rejected_document_oversized", "terms"),
        (20, envelope(20, config_document(20, threshold=99), key="not-the-key"),
         "config_rejected_bad_signature", "bad signature"),
        (21, envelope(21, surrogate), "config_rejected_parse_error", "parse error"),
    ]
    expected: dict[str, int] = {"config_rejected": len(cases)}
    for version, payload, counter, reason in cases:
        before = len(watcher.acks)
        cloud.publish(config_topic, payload, retain=True)
        ack = wait_for(lambda: len(watcher.acks) > before and watcher.acks[-1], 60,
                       f"an ack for the envelope meant as version {version}")
        assert ack["status"] == "rejected" and ack["version"] == version, ack
        assert reason in ack["reason"], ack
        assert ack["appliedVersion"] == 1
        expected[counter] = expected.get(counter, 0) + 1
        alarms.still_matching(f"config envelope {version} ({counter})")
        assert agent.proc.poll() is None

    counters = latest_counters(watcher, expected, "every rejection counted by kind")
    assert counters["config_applied"] == 1 and counters["config_rejected_decoder_error"] == 0
    assert counters["handler_error"] == 0
    assert watcher.statuses[-1]["configVersion"] == 1
    log = agent.log()
    assert "Traceback" not in log
    # One log line per kind a minute: the second envelope_malformed one onwards is suppressed.
    assert log.count("config event=rejected") == len({c[2] for c in cases})
    assert log.count("kind=envelope_malformed") == 1

    # And the gateway still takes a good document.
    push_config(cloud, 30, config_document(30, patterns={"alarm": ALARM}))
    assert watcher.wait_ack(30)["status"] == "applied"
    alarms.still_matching("a good document")
    wait_for(lambda: agent.state().get("configVersion") == 30, 20, "status showing version 30")

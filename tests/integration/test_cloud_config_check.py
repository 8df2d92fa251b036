"""What a gateway refuses to compile, the cloud refuses before it signs or publishes anything, in the
gateway's own words: `push-config`, the dashboard's configuration form, a gateway page's upload, and
`make-config` (real processes, real Mosquitto, real SQLite). The expected reason is always what the
agent's own `compile_document` says about the same document."""
from __future__ import annotations

import html
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from cloud_harness import CloudProcess, query, retained_config, write_config
from dashboard_data import HttpSession, fill_known_database, free_port, wait_until_serving, write_dashboard_config
from edgewave.agent.config import AgentSettings
from edgewave.agent.engine import parse_query
from edgewave.agent.reconfigure import compile_document, document_limits
from edgewave.shared.configdoc import ConfigRejected, build_config_document, load_config_document

pytestmark = [pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

FIRE = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?level
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?s } ?s ex:locatedIn ?room }"""


def document(labels: dict[str, str], extra: str = "") -> str:
    """A config document with one ew:Pattern per label (label -> query text)."""
    patterns = " ;\n".join(f'    ew:pattern [ a ew:Pattern ; ew:name "{label}" ; ew:query """{text}""" ]'
                           for label, text in labels.items())
    return f'''@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <http://example.org/> .
ew:config {{
  ex:cfg a ew:GatewayConfig{extra} ;
{patterns} .
}}
ew:static {{
  ex:s1 ex:locatedIn ex:room1 .
}}
'''


# Two labels whose queries both REGISTER <fire>: every pattern parses, the document loads, but a
# gateway cannot register one name twice.
TWICE = document({"fire": FIRE, "fire-again": FIRE.replace("PT10S", "PT20S")})


def agent_reason(text: str, version: int = 1) -> str:
    """The reason the agent's own compile gives for ``text`` pushed to it (what its config ack would say)."""
    settings = AgentSettings()
    try:
        compile_document(version, "trig", text, settings, document_limits(settings))
    except ConfigRejected as exc:
        return exc.reason
    raise AssertionError("the agent compiles this document")


def test_the_example_parses_everywhere_but_the_agent_refuses_to_compile_it():
    """What the cloud checked before, parsing the document and each pattern, passes: only a compile sees it."""
    doc = load_config_document(TWICE, "trig")
    assert {label: parse_query(text).name for label, text in doc.patterns.items()} == {"fire": "fire",
                                                                                      "fire-again": "fire"}
    assert agent_reason(TWICE) == "duplicate pattern name fire"


# -- push-config ----------------------------------------------------------------------------------------


def push(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config),
                           *args], capture_output=True, text=True, timeout=120)


def test_push_config_refuses_what_the_agent_cannot_compile_with_its_reason(tmp_path, mqtt_broker):
    config = write_config(tmp_path, mqtt_broker)
    path = tmp_path / "twice.trig"
    path.write_text(TWICE)
    result = push(config, "--gateway", "gw1", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert (f"edgewave-cloud push-config: refused, nothing published: {path}: {agent_reason(TWICE)}"
            in result.stderr.splitlines()), result.stderr
    assert result.stdout == ""
    assert retained_config(mqtt_broker, "gw1") is None
    assert query(tmp_path / "cloud.db", "SELECT COUNT(*) FROM config_pushes") in ([], [(0,)])
    assert query(tmp_path / "cloud.db", "SELECT COUNT(*) FROM push_failures") in ([], [(0,)])
    # A syntax error reads as the agent's too.
    broken = document({"fire": FIRE.replace("?e ex:raisedBy ?s }", "?e ex:raisedBy }")})
    path.write_text(broken)
    result = push(config, "--gateway", "gw1", str(path))
    assert result.returncode == 2
    assert agent_reason(broken).startswith("parse error in pattern fire at line 4 column ")
    assert f"refused, nothing published: {path}: {agent_reason(broken)}" in result.stderr, result.stderr


def test_push_config_refuses_a_message_naming_a_variable_the_pattern_does_not_bind(tmp_path, mqtt_broker):
    """A pattern's alert message may name only what the pattern reports: ?s is in its WHERE, not its SELECT."""
    config = write_config(tmp_path, mqtt_broker)
    text = document({"fire": FIRE}).replace(
        'ew:name "fire" ;', 'ew:name "fire" ; ew:severity "critical" ; ew:message "Fire in {room}: level {level}, '
                            'sensor {s}" ;')
    path = tmp_path / "unbound.trig"
    path.write_text(text)
    reason = agent_reason(text)
    assert reason == "pattern fire: its message names ?s, which the pattern does not bind (it binds ?room, ?level)"
    result = push(config, "--gateway", "gw1", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"refused, nothing published: {path}: {reason}" in result.stderr, result.stderr
    assert retained_config(mqtt_broker, "gw1") is None
    # Without {s} the same document is signed and published.
    path.write_text(text.replace(", sensor {s}", ""))
    result = push(config, "--gateway", "gw1", "--timeout", "1", str(path))
    assert "refused" not in result.stderr and retained_config(mqtt_broker, "gw1") is not None, result.stderr


def test_a_document_version_other_than_the_one_given_is_not_published(tmp_path, mqtt_broker):
    """A document naming its own ew:version is only good for that version: the gateway's push fails, recorded
    with the agent's reason, and nothing is signed or published."""
    config = write_config(tmp_path, mqtt_broker)
    text = document({"fire": FIRE}, extra=" ;\n    ew:version 9")
    path = tmp_path / "v9.trig"
    path.write_text(text)
    result = push(config, "--gateway", "gw1", str(path))
    reason = agent_reason(text, version=1)
    assert reason == "version mismatch: envelope says 1, document says 9"
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"gw1: not pushed (version 1): {reason}" in result.stdout.splitlines(), result.stdout
    assert retained_config(mqtt_broker, "gw1") is None
    assert query(tmp_path / "cloud.db", "SELECT version, status, reason FROM config_pushes") == [(1, "failed", reason)]


# -- the dashboard ---------------------------------------------------------------------------------------


def post_upload(session: HttpSession, path: str, fields: dict[str, str], filename: str,
                content: bytes) -> tuple[int, bytes]:
    """A multipart/form-data POST with one file in ``document``, as the gateway page's form sends it."""
    boundary = uuid.uuid4().hex
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="document"; filename="{filename}"\r\n'
             f"Content-Type: application/trig\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(session.base_url + path, data=body,
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with session.opener.open(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def shown_error(body: bytes) -> str:
    """The text of the form's error paragraph."""
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', body.decode(), re.S)
    assert found, body.decode()[-2000:]
    return html.unescape(found.group(1))


@pytest.mark.slow
def test_the_dashboard_forms_refuse_what_the_agent_cannot_compile_with_its_reason(tmp_path, mqtt_broker):
    port = free_port()
    dashboard_section = yaml.safe_load(write_dashboard_config(tmp_path, port).read_text())["dashboard"]
    config = write_config(tmp_path, mqtt_broker, dashboard=dashboard_section,
                          gateways={"gw-ok": {"key": "key-of-gw-ok"}})
    db = tmp_path / "cloud.db"
    fill_known_database(db)
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        session = HttpSession(f"http://127.0.0.1:{port}", "alice")
        expected = agent_reason(TWICE)
        # The configuration page's editor, to one gateway.
        status, body = session.post("/config/push", {"csrf_token": session.csrf, "gateway": "gw-ok",
                                                     "format": "trig", "document": TWICE})
        assert status == 400 and shown_error(body) == expected
        # The gateway page's upload form.
        status, body = post_upload(session, "/gateways/gw-ok/push", {"csrf_token": session.csrf, "format": "trig"},
                                   "twice.trig", TWICE.encode())
        assert status == 400 and shown_error(body) == expected
        assert query(db, "SELECT COUNT(*) FROM config_pushes") == [(0,)]
        assert query(db, "SELECT COUNT(*) FROM push_failures") in ([], [(0,)])
        assert retained_config(mqtt_broker, "gw-ok") is None
        assert dashboard.log().count("dashboard push refused user=alice gateway") == 2, dashboard.log()
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
    assert "Traceback" not in dashboard.log()


# -- make-config -----------------------------------------------------------------------------------------


def test_make_config_refuses_what_the_agent_cannot_compile_with_its_reason(tmp_path):
    """Two files registering one name: the document holding both is the agent's to refuse, so no document."""
    first = REPO / "configs/patterns/fire.rq"
    second = tmp_path / "fire-hotter.rq"
    second.write_text(first.read_text().replace("FILTER(?temp > ?threshold)", "FILTER(?temp >= ?threshold)"))
    out_file = tmp_path / "out.trig"
    result = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--query", str(first), "--query",
                             str(second), "--out", str(out_file)], capture_output=True, text=True, timeout=120)
    both = build_config_document([("fire", first.read_text()), ("fire", second.read_text())], [], [])
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"edgewave-cloud make-config: {agent_reason(both)}"]
    assert agent_reason(both) == "duplicate pattern name fire"
    assert not out_file.exists()


def make_config(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "edgewave-cloud"), "make-config", *args], capture_output=True, text=True,
                          timeout=120)


def test_make_config_writes_alert_text_the_agent_reads_and_refuses_a_message_naming_an_unbound_variable(tmp_path):
    fire = str(REPO / "configs/patterns/fire.rq")
    alerts = tmp_path / "alerts.yaml"
    alerts.write_text('fire: {title: Fire, severity: critical, message: "Fire in {room}: {temp} °C ❗"}\n')
    made = make_config("--query", fire, "--alerts", str(alerts), "--out", str(tmp_path / "out.trig"))
    assert made.returncode == 0, made.stderr
    read = load_config_document((tmp_path / "out.trig").read_text(), "trig")
    assert (read.alerts["fire"].title, read.alerts["fire"].severity, read.alerts["fire"].message) == \
        ("Fire", "critical", "Fire in {room}: {temp} °C ❗")
    alerts.write_text('fire: {message: "Fire in {building}"}\n')
    refused = make_config("--query", fire, "--alerts", str(alerts))
    assert refused.returncode == 2 and "its message names ?building, which the pattern does not bind" \
        in refused.stderr, refused.stderr
    alerts.write_text('smoke: {title: Smoke}\n')
    refused = make_config("--query", fire, "--alerts", str(alerts))
    assert refused.returncode == 2 and "alert text for 'smoke', which no --query pattern registers" \
        in refused.stderr, refused.stderr

"""The settings binder, the broker shape and the MQTT client factory every tier shares."""
from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass, field

import pytest

from edgewave.agent.config import settings_from_dict
from edgewave.cloud.settings import load_settings as load_cloud_settings
from edgewave.firmware_sim.config import load_config as load_sim_config
from edgewave.shared.broker import BrokerSettings, ReconnectSettings, SessionBrokerSettings, TlsSettings
from edgewave.shared.mqtt_client import MQTT_V311, MQTT_V5, Will, new_client
from edgewave.shared.settings import NOT_A_KEY, SettingsError, bind, check_keys, load_yaml, setting


@dataclass
class Inner:
    count: int = setting(3, minimum=1, maximum=10)
    mode: str = setting("fast", choices=("fast", "safe"))


@dataclass
class Outer:
    name: str = "x"
    ratio: float = 0.5
    enabled: bool = True
    limit: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)
    other: Inner = field(default_factory=lambda: Inner(count=7))
    origin: str | None = field(default=None, metadata=NOT_A_KEY)


def test_values_bind_with_their_types_and_omitted_keys_keep_the_defaults():
    got = bind(Outer, {"name": 12, "ratio": 1, "limit": 4.0, "labels": {"a": 1}, "inner": {"mode": "safe"},
                       "other": {"mode": "safe"}})
    assert got == Outer(name="12", ratio=1.0, limit=4, labels={"a": "1"}, inner=Inner(mode="safe"),
                        other=Inner(count=7, mode="safe"))
    assert isinstance(got.ratio, float) and isinstance(got.limit, int)
    assert bind(Outer, None) == Outer() and bind(Outer, {"inner": None, "labels": None}) == Outer()
    assert bind(Outer, {"limit": None}).limit is None
    assert bind(Inner, {"count": 2}, base=Inner(mode="safe")) == Inner(count=2, mode="safe")


@pytest.mark.parametrize("data, message", [
    ({"nmae": "y"}, r"^nmae: unknown key \(did you mean name\?\)$"),
    ({"zzz": 1}, r"^zzz: unknown key \(known: enabled, inner, labels, limit, name, other, ratio\)$"),
    ({"origin": "f"}, r"^origin: unknown key"),
    ({"inner": {"cuont": 2}}, r"^inner\.cuont: unknown key \(did you mean count\?\)$"),
    ({"ratio": "half"}, r"^ratio: expected a number, got 'half'$"),
    ({"ratio": True}, r"^ratio: expected a number"),
    ({"limit": 2.5}, r"^limit: expected an integer, got 2.5$"),
    ({"enabled": "yes"}, r"^enabled: expected true or false"),
    ({"name": None}, r"^name: a value is required$"),
    ({"name": ["a"]}, r"^name: expected a string, got list$"),
    ({"labels": "a=b"}, r"^labels: expected a mapping"),
    ({"inner": 3}, r"^inner: expected a mapping, got 3$"),
    ({"inner": {"count": 0}}, r"^inner\.count: expected 1 to 10, got 0$"),
    ({"inner": {"mode": "slow"}}, r"^inner\.mode: expected one of fast, safe, got 'slow'$"),
])
def test_mistakes_name_the_dotted_key(data, message):
    with pytest.raises(SettingsError, match=message) as caught:
        bind(Outer, data)
    assert caught.value.key == message.lstrip("^").split(":")[0].replace("\\", "")


def test_dashes_stand_for_underscores_and_the_file_is_named(tmp_path):
    @dataclass
    class Dashes:
        max_rows: int = 1

    assert bind(Dashes, {"max-rows": 5}).max_rows == 5
    path = tmp_path / "s.yaml"
    path.write_text("max_rows: many\n")
    with pytest.raises(SettingsError) as caught:
        load_yaml(path, lambda data: bind(Dashes, data))
    assert str(caught.value) == f"{path}: max_rows: expected a number, got 'many'"
    assert caught.value.source == str(path) and caught.value.reason == "expected a number, got 'many'"
    path.write_text("max_rows: [1\n")
    with pytest.raises(SettingsError, match=rf"^{path}: not valid YAML"):
        load_yaml(path, lambda data: bind(Dashes, data))
    with pytest.raises(SettingsError, match=rf"^{tmp_path / 'none.yaml'}: cannot read the file"):
        load_yaml(tmp_path / "none.yaml", lambda data: bind(Dashes, data))


def test_check_keys_suggests_the_nearest():
    check_keys({"rooms": 1}, ["rooms", "armed"], "site")
    with pytest.raises(SettingsError, match=r"^site\.roms: unknown key \(did you mean rooms\?\)$"):
        check_keys({"roms": 1}, ["rooms", "armed"], "site")


def test_one_error_type_in_every_tier(tmp_path):
    from edgewave.agent.config import SettingsError as AgentError
    from edgewave.cloud.settings import SettingsError as CloudError
    from edgewave.firmware_sim.config import SimConfigError
    assert AgentError is CloudError is SimConfigError is SettingsError
    bad = tmp_path / "bad.yaml"
    bad.write_text("broker: {prot: 1883}\n")
    for load in (load_cloud_settings, load_sim_config):
        with pytest.raises(SettingsError, match=rf"^{bad}: broker\.prot: unknown key \(did you mean port\?\)$"):
            load(bad)


# -- the broker shape ----------------------------------------------------------------------

def test_every_tier_reads_the_same_broker_keys(tmp_path):
    keys = {"host": "broker.example.org", "port": 8883, "keepalive_s": 20, "username": "u",
            "password_file": str(tmp_path / "pw"), "tls": {"ca": "ca.crt", "cert": "c.crt", "key": "c.key"}}
    expected = BrokerSettings(host="broker.example.org", port=8883, keepalive_s=20, username="u",
                              password_file=str(tmp_path / "pw"), tls=TlsSettings("ca.crt", "c.crt", "c.key"))
    (tmp_path / "pw").write_text("secret\n")
    agent = settings_from_dict({"cloud": keys}).cloud
    cloud_yaml = tmp_path / "cloud.yaml"
    cloud_yaml.write_text(f"broker: {keys}\n")
    sim_yaml = tmp_path / "sim.yaml"
    sim_yaml.write_text(f"broker: {keys}\n")
    cloud = load_cloud_settings(cloud_yaml).broker
    sim = load_sim_config(sim_yaml).gateways[0].broker
    for broker in (agent, cloud, sim):
        base = {f.name: getattr(broker, f.name) for f in dataclasses.fields(BrokerSettings)}
        assert BrokerSettings(**{**base, "password": None}) == expected
        assert broker.secret() == "secret" and broker.tls.enabled


def test_the_older_flat_tls_keys_still_read_and_cannot_be_given_twice():
    assert bind(BrokerSettings, {"tls_ca": "ca.crt", "tls_cert": "c", "tls_key": "k"}).tls == TlsSettings("ca.crt", "c", "k")
    with pytest.raises(SettingsError, match=r"^broker\.tls_ca: given twice, also as broker\.tls\.ca$"):
        bind(BrokerSettings, {"tls_ca": "a", "tls": {"ca": "b"}}, key="broker")


def test_broker_ranges_and_password_precedence(tmp_path):
    with pytest.raises(SettingsError, match=r"^port: expected 1 to 65535, got 0$"):
        bind(BrokerSettings, {"port": 0})
    with pytest.raises(SettingsError, match=r"^session_expiry_s: expected at least 0, got -1$"):
        bind(SessionBrokerSettings, {"session_expiry_s": -1})
    assert BrokerSettings(password="inline").secret() == "inline"
    (tmp_path / "pw").write_text("  from-file\n")
    assert BrokerSettings(password="inline", password_file=str(tmp_path / "pw")).secret() == "from-file"
    assert not TlsSettings(key="k").enabled and TlsSettings(cert="c").enabled


# -- the client factory --------------------------------------------------------------------

def test_the_client_carries_protocol_credentials_will_and_reconnect_delays(tmp_path):
    (tmp_path / "pw").write_text("pw\n")
    broker = BrokerSettings(username="gw1", password_file=str(tmp_path / "pw"))
    client = new_client(broker, "c1", will=Will("ew/gw1/status", b"offline"), max_inflight=7)
    assert client._client_id == b"c1" and client._protocol == MQTT_V5
    assert (client._username, client._password) == (b"gw1", b"pw")
    assert (client._will_topic, client._will_payload, client._will_qos, client._will_retain) == (
        b"ew/gw1/status", b"offline", 1, True)
    assert client._max_inflight_messages == 7 and client._ssl_context is None
    old = new_client(BrokerSettings(), "c2", protocol=MQTT_V311, reconnect=ReconnectSettings(1, 30))
    assert old._protocol == MQTT_V311 and old._username is None
    assert (old._reconnect_min_delay, old._reconnect_max_delay) == (1, 30)


def test_tls_verifies_the_broker_unless_told_not_to(tmp_path):
    from edgewave.cloud.pki import init_broker_tls
    tls = init_broker_tls(tmp_path, ["localhost"])
    client = new_client(BrokerSettings(tls=TlsSettings(ca=str(tls["ca"]))), "t")
    assert client._ssl_context.verify_mode == ssl.CERT_REQUIRED and client._ssl_context.check_hostname
    insecure = new_client(BrokerSettings(tls=TlsSettings(ca=str(tls["ca"]), insecure=True)), "t")
    assert not insecure._ssl_context.check_hostname
    with pytest.raises(OSError):
        new_client(BrokerSettings(tls=TlsSettings(ca=str(tmp_path / "missing.crt"))), "t")

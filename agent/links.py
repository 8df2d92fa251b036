"""The agent's two broker connections and what their sessions promise.

- *cloud*: a persistent session (the retained config documents and the PUBACKs of events
  in flight survive a reconnect), the ``offline`` status as Last Will, subscribed to
  ``ew/<gateway>/config`` and to ingest's acknowledgements on ``ew/<gateway>/events/landed``
  (unless ``uplink.landed.mode`` is off); the uplink publishes the events on it.
- *local*: the sensors' broker. With ``local.session_expiry_s > 0`` the session is
  persistent and a sensor message is acknowledged only once handled (its events are in
  the outbox), so one the agent had not handled when it died is delivered again when it
  comes back; the broker sends at most ``input.queue_max`` unacknowledged messages
  (MQTT 5 Receive Maximum), which bounds the agent's queue. Subscribed to ``ew/in/#``
  (N-Triples) and to the topic filter of each payload mapping the applied config document
  holds (``sensor_subscriptions``; changed with the document).

Both run on one ``NetworkLoop`` (network_loop.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from edgewave.agent.config import LANDED_OFF, AgentSettings
from edgewave.agent.mqtt_link import MessageHandler, MqttLink
from edgewave.agent.network_loop import NetworkLoop
from edgewave.agent.status import encode_status, status_document
from edgewave.shared import topics
from edgewave.shared.mosquitto_files import gateway_cloud_client_id
from edgewave.shared.mqtt_client import Will

if TYPE_CHECKING:
    from edgewave.agent.reconfigure import CompiledConfig


def cloud_link(settings: AgentSettings, loop: NetworkLoop, on_message: MessageHandler,
               on_connected: Callable[[bool], None], on_published: Callable[[int, int], None]) -> MqttLink:
    """The connection to the cloud broker: events up, config documents down; ``on_published``
    hears each PUBACK (message id, reason code), for the uplink."""
    s, gw = settings, settings.gateway
    offline = encode_status(status_document(gw, "offline"))
    subscriptions = [(topics.config_topic(gw), 1)]
    if s.uplink.landed.mode != LANDED_OFF:
        subscriptions.append((topics.landed_topic(gw), 1))
    return MqttLink("cloud", s.cloud, s.reconnect, client_id=s.cloud.client_id or gateway_cloud_client_id(gw),
                    persistent=True, will=Will(topics.status_topic(gw), offline, qos=1, retain=True),
                    subscriptions=subscriptions, on_message=on_message,
                    on_connected=on_connected, on_published=on_published, max_inflight=s.outbox.max_inflight,
                    loop=loop)


def sensor_subscriptions(settings: AgentSettings, config: CompiledConfig | None) -> list[tuple[str, int]]:
    """What the local link subscribes to: N-Triples input and each mapping's topic filter."""
    qos = settings.input.qos
    return [(topics.ALL_SENSOR_INPUT, qos)] + [(m.topic_filter, qos) for m in (config.mappings if config else ())]


def local_link(settings: AgentSettings, loop: NetworkLoop, on_message: MessageHandler,
               config: CompiledConfig | None = None) -> MqttLink:
    """The connection to the sensors' broker, every sensor topic of ``config`` subscribed."""
    s, gw = settings, settings.gateway
    keep = s.local.session_expiry_s > 0
    return MqttLink("local", s.local, s.reconnect, client_id=s.local.client_id or f"edgewave-{gw}-local",
                    persistent=keep, ack_after_handling=keep,
                    receive_maximum=s.input.queue_max if keep else None,
                    subscriptions=sensor_subscriptions(s, config), on_message=on_message, loop=loop)

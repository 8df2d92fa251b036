"""``/metrics``: the cloud's and the fleet's figures for a Prometheus a site already runs.

Read from the same database the pages read, at scrape time, so the numbers are the ones the
dashboard shows (a counter here is the sum the overview's tables add up) and nothing is kept
in this process between scrapes: a restarted dashboard, or two of them, answer alike. The
format and the families are the ``prometheus-client`` library's; the names follow its
conventions (``_total`` for counters, base units, ``edgewave_`` first).

Per gateway, from its last status: whether it is online by the dashboard's rules, its
outbox (events waiting, age of the oldest), events dropped, the config version it applied,
and its traffic counters. From the cloud's aggregates: matches per gateway and pattern,
significant observations per gateway, the Spark job's committed batches, rows and rejected
records per query and the time of its last commit. From each ingest worker's row
(cloud/ingest_figures.py): what it landed and acknowledged, the messages it rejected by
reason, and its group commits' count and time. From the dashboard itself: the live streams
open now, the alarms by state, and the notifications about them by target and state with
their delivery attempts (from the dashboard's own state file).
"""
from __future__ import annotations

from typing import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from .. import ingest_figures
from . import queries
from .alarms import STATES, AlarmStore
from .notify import NOTIFICATION_STATES, Notifier

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Status counters an agent reports, as (metric name, help).
_GATEWAY_COUNTERS = {
    "messages_in": ("edgewave_gateway_messages_in", "Sensor messages the gateway's agent received."),
    "bytes_in": ("edgewave_gateway_bytes_in", "Bytes of sensor messages the agent received."),
    "bytes_forwarded": ("edgewave_gateway_bytes_forwarded", "Bytes the agent sent upstream."),
    "dropped": ("edgewave_gateway_dropped_events", "Events the agent's outbox dropped under its bounds."),
}


def _gateway_families(rows: list[queries.GatewayRow]) -> Iterator[Metric]:
    online = GaugeMetricFamily("edgewave_gateway_online", "1 when the dashboard counts the gateway online.",
                               labels=["gateway"])
    seen = GaugeMetricFamily("edgewave_gateway_last_status_timestamp_seconds",
                             "When the gateway's last status arrived.", labels=["gateway"])
    depth = GaugeMetricFamily("edgewave_gateway_outbox_events", "Events in the gateway's outbox, not yet landed.",
                              labels=["gateway"])
    oldest = GaugeMetricFamily("edgewave_gateway_outbox_oldest_age_seconds",
                               "Age of the oldest event in the gateway's outbox, now.", labels=["gateway"])
    version = GaugeMetricFamily("edgewave_gateway_config_version", "The config version the gateway applied.",
                                labels=["gateway"])
    counters = {name: CounterMetricFamily(metric, text, labels=["gateway"])
                for name, (metric, text) in _GATEWAY_COUNTERS.items()}
    for g in rows:
        labels = [g.gateway]
        online.add_metric(labels, 1.0 if g.health == queries.ONLINE else 0.0)
        if type(g.last_seen_ms) is int:
            seen.add_metric(labels, g.last_seen_ms / 1000)
        if g.outbox_depth is not None:
            depth.add_metric(labels, g.outbox_depth)
        if g.oldest_unsent_ms is not None:
            oldest.add_metric(labels, g.oldest_unsent_ms / 1000)
        if type(g.config_version) is int:
            version.add_metric(labels, g.config_version)
        for name, family in counters.items():
            value = g.counter(name)
            if value is not None:
                family.add_metric(labels, value)
    yield from (online, seen, depth, oldest, version, *counters.values())


def _aggregate_families(q: queries.Query) -> Iterator[Metric]:
    matches = CounterMetricFamily("edgewave_matches", "Matches the Spark job counted, per gateway and pattern.",
                                  labels=["gateway", "pattern"])
    for gateway, pattern, count in q.rows("SELECT gateway, pattern, SUM(count) FROM matches_per_minute "
                                          "GROUP BY gateway, pattern ORDER BY 1, 2"):
        matches.add_metric([gateway, pattern], count)
    significant = CounterMetricFamily("edgewave_significant_observations",
                                      "Significant observations the Spark job counted, per gateway.",
                                      labels=["gateway"])
    for gateway, count in q.rows("SELECT gateway, SUM(count) FROM significant_per_minute GROUP BY 1 ORDER BY 1"):
        significant.add_metric([gateway], count)
    batches = CounterMetricFamily("edgewave_spark_batches", "Micro-batches the Spark job committed.",
                                  labels=["query"])
    rows = CounterMetricFamily("edgewave_spark_batch_rows", "Rows in the committed micro-batches.", labels=["query"])
    rejected = CounterMetricFamily("edgewave_spark_rejected_records",
                                   "Records the Spark job rejected (kept in rejected_records).", labels=["query"])
    last = GaugeMetricFamily("edgewave_spark_last_commit_timestamp_seconds",
                             "When the Spark job last committed a micro-batch.", labels=["query"])
    for query_id, n, total, bad, last_ms in q.rows(
            "SELECT query_id, COUNT(*), SUM(rows), SUM(rejected), MAX(committed_ms) FROM committed_batches "
            "GROUP BY query_id ORDER BY 1"):
        batches.add_metric([query_id], n)
        rows.add_metric([query_id], total or 0)
        rejected.add_metric([query_id], bad or 0)
        last.add_metric([query_id], last_ms / 1000)
    yield from (matches, significant, batches, rows, rejected, last)


# Ingest workers' counters, as (metric name, help); per worker since it started.
_INGEST_COUNTERS = {
    "events": ("edgewave_ingest_events_landed", "Events an ingest worker landed (fsynced into the landing zone)."),
    "batches": ("edgewave_ingest_batches", "Batched messages of events an ingest worker read."),
    "status": ("edgewave_ingest_status_messages", "Gateway status messages an ingest worker recorded."),
    "acks": ("edgewave_ingest_config_acks", "Config acknowledgements an ingest worker recorded."),
    "landed_acks": ("edgewave_ingest_landed_acks_sent", "Landed acknowledgements an ingest worker sent gateways."),
    "feed_errors": ("edgewave_ingest_live_feed_errors", "Group commits whose events the live feed could not show."),
}


def _ingest_families(q: queries.Query) -> Iterator[Metric]:
    workers = ingest_figures.read_all(q.rows(ingest_figures.READ_SQL))
    counters = {name: CounterMetricFamily(metric, text, labels=["worker"])
                for name, (metric, text) in _INGEST_COUNTERS.items()}
    rejected = CounterMetricFamily("edgewave_ingest_rejected_messages",
                                   "Messages an ingest worker rejected (kept in the rejected files), by reason.",
                                   labels=["worker", "reason"])
    commits = SummaryMetricFamily("edgewave_ingest_group_commit_seconds",
                                  "Time an ingest worker's group commits took (landing fsync to acknowledgements).",
                                  labels=["worker"])
    updated = GaugeMetricFamily("edgewave_ingest_figures_timestamp_seconds",
                                "When an ingest worker last wrote these figures.", labels=["worker"])
    for w in workers:
        labels = [str(w.worker)]
        for name, family in counters.items():
            family.add_metric(labels, w.counters.get(name, 0))
        for reason in sorted(set(ingest_figures.REJECT_REASONS) | set(w.rejected)):
            rejected.add_metric([*labels, reason], w.rejected.get(reason, 0))
        commits.add_metric(labels, count_value=w.counters.get("commits", 0), sum_value=w.commit_seconds)
        updated.add_metric(labels, w.updated_ms / 1000)
    yield from (*counters.values(), rejected, commits, updated)


def _alarm_family(alarms: AlarmStore) -> Metric:
    family = GaugeMetricFamily("edgewave_alarms", "Alarms on the dashboard, by state.", labels=["state"])
    counts = alarms.count_by_state()
    for state in STATES:
        family.add_metric([state], counts.get(state, 0))
    return family


def _notification_families(notifier: Notifier) -> Iterator[Metric]:
    states, attempts = notifier.counts()
    messages = GaugeMetricFamily("edgewave_notifications", "Alarm notifications kept, by target and state "
                                 "(pending, sent, failed, suppressed by the per-key limit).", labels=["target", "state"])
    for target in sorted({t for t, _ in states} | set(notifier.config.targets)):
        for state in NOTIFICATION_STATES:
            messages.add_metric([target, state], states.get((target, state), 0))
    tries = CounterMetricFamily("edgewave_notification_attempts", "Delivery attempts of alarm notifications.",
                                labels=["target", "outcome"])
    for (target, outcome), n in sorted(attempts.items()):
        tries.add_metric([target, outcome], n)
    yield from (messages, tries)


class _Snapshot(Collector):
    """Families already read (one scrape's worth): the registry only renders them."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


def exposition(q: queries.Query, gateways: list[queries.GatewayRow], alarms: AlarmStore,
               notifier: Notifier | None = None, live_streams: int = 0) -> bytes:
    """The whole scrape, in the text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    notifications = _notification_families(notifier) if notifier is not None else ()
    streams = GaugeMetricFamily("edgewave_live_streams", "Live pages following the feed now (server-sent event "
                                "streams this dashboard serves).", value=live_streams)
    registry.register(_Snapshot([*_gateway_families(gateways), *_aggregate_families(q), *_ingest_families(q),
                                 streams, _alarm_family(alarms), *notifications]))
    return generate_latest(registry)

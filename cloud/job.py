"""The Spark Structured Streaming job: landing zone -> de-duplicated events -> aggregates.

The query reads the landing zone's closed ``*.jsonl`` files as a file stream of
lines, once, and parses each with the event schema (derived from
``shared.events.FIELDS``) in PERMISSIVE mode, so every line is either a valid
event or a rejected line, told apart in the JVM: a bad line can never fail a
batch. Every row goes through one de-duplication operator
(``dropDuplicatesWithinWatermark`` with the watermark on ingest time): an event
is keyed by its id, so a redelivered event is dropped however late its match
time is, and a match is never dropped for an old match time; a rejected line
has a key of its own and no event time, so it is passed on once. Each
micro-batch goes to ``AggregateSink``, which computes the batch's partial
aggregates in one Spark job (a second only when the batch has rejected lines,
to collect them with their reasons), writes the batch's events to Parquet
(``<history>/events/batch_id=N/``, overwritten if the batch is replayed) and
adds the aggregates and the rejected lines to SQLite exactly once (see
``aggregates``). The checkpoint holds the file-source log and the
de-duplication state, so a restarted job resumes where it stopped.

Nothing here runs Python on executors (no UDFs), so the same job runs
unchanged on a standalone cluster: only the driver needs Python and SQLite.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

from edgewave.shared import failpoints
from edgewave.shared.events import (BINDINGS, ENTAILED, FIELDS, LONG, REQUIRED_FIELDS, ROWS, STRING, STRINGS,
                                    TYPE_OF_KIND, EventField)
from edgewave.shared.shutdown import stop_on_signals

from .aggregates import (RECORD_LIMIT_BYTES, BatchAggregates, InstanceResult, RejectedRecord, apply_batch,
                         committed_queries, ensure_aggregate_schema, instance_part)
from .database import open_database
from .settings import CloudSettings
from .spark_runtime import build_session, spark_conf, write_log4j_config

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

QUERY_NAME = "edgewave_aggregates"


class CheckpointMismatch(RuntimeError):
    """The checkpoint and the SQLite aggregates do not belong together."""


INGEST_TIME = "ingestTime"
"""Added by ingest to every landing record: when it was received (ms)."""
LANDING_FIELDS: tuple[EventField, ...] = FIELDS + (EventField(INGEST_TIME, LONG, True),)
"""A landing-zone record: the uplink event's fields (shared/events.py) plus ingestTime."""
REQUIRED_COLUMNS: tuple[str, ...] = REQUIRED_FIELDS + (INGEST_TIME,)
HISTORY_COLUMNS: list[str] = [f.name for f in LANDING_FIELDS]
CORRUPT_COLUMN = "_corrupt_record"
"""Where Spark's JSON parser puts a line it could not convert to the schema (PERMISSIVE mode)."""
DEDUP_KEY = "_dedup_key"
"""What the de-duplication compares: an event's id; for a rejected line, a key of its own."""
EVENT_TIME = "_ingest_ts"
"""The watermark's column: ingest time as a timestamp; null for a rejected line."""

PLAIN_PARQUET_COLUMNS: tuple[str, ...] = (
    "id", "windowStart", "windowEnd", "emittedAt", "ingestTime", "triples.list.element",
    "entailed.list.element.triple", "entailed.list.element.from")
"""History columns (Parquet column paths) whose values are nearly all distinct: written without a
dictionary, which would cost time to build and then be dropped or be as large as the values."""

_TYPE_NAMES = {STRING: "a string", LONG: "a long (ms)", STRINGS: "an array of strings",
               BINDINGS: "an array of {variable, value} objects",
               ENTAILED: "an array of {triple, from, axioms} objects",
               ROWS: "an array of rows of {variable, value} objects"}
"""How a rejection reason names each field type of shared/events.py."""


def _spark_type(field_type: str) -> Any:
    """The Spark type of a field type of shared/events.py: a new type there needs a line here."""
    from pyspark.sql import types as T

    def array_of_objects(*members: tuple[str, Any]) -> Any:
        return T.ArrayType(T.StructType([T.StructField(name, member) for name, member in members]))

    text, texts = T.StringType(), T.ArrayType(T.StringType())
    types = {
        STRING: text,
        LONG: T.LongType(),
        STRINGS: texts,
        BINDINGS: array_of_objects(("variable", text), ("value", text)),
        ENTAILED: array_of_objects(("triple", text), ("from", text), ("axioms", texts)),
        ROWS: T.ArrayType(array_of_objects(("variable", text), ("value", text))),
    }
    if field_type not in types or field_type not in _TYPE_NAMES:  # a reason must be able to name it too
        raise ValueError(f"event field type {field_type!r} (shared/events.py) has no Spark type in cloud/job.py")
    return types[field_type]


def event_schema() -> Any:
    """The Spark schema of a landing-zone record, derived from ``shared.events.FIELDS`` plus ingestTime.

    One definition of the event: what ingest validates is what the job reads.
    """
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, _spark_type(f.type)) for f in LANDING_FIELDS])


def _rejection_reason() -> Any:
    """Why a rejected line was rejected: short, and naming the field where there is one.

    Evaluated only on rejected lines. A line Spark could not convert is inspected
    with ``try_parse_json`` (a Variant) to say which field does not fit; the rest
    are plain column tests.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    misfits = []
    for f in LANDING_FIELDS:
        # The parser nulls a value it cannot convert: a field that is null here but not in the
        # line is the one that does not fit. In an array of objects only the member is nulled.
        unread = F.col(f.name).isNull()
        spark_type = _spark_type(f.type)
        if isinstance(spark_type, T.ArrayType) and isinstance(spark_type.elementType, T.StructType):
            holes = " OR ".join(f"x.`{m.name}` IS NULL" for m in spark_type.elementType.fields)
            unread = unread | F.expr(f"exists(`{f.name}`, x -> x IS NULL OR {holes})")
        got = F.expr(f"to_json(variant_get(json, '$.{f.name}', 'variant'))")  # null if absent, 'null' if null
        shown = F.when(F.length(got) > 40, F.concat(F.substring(got, 1, 40), F.lit("..."))).otherwise(got)
        misfits.append(F.when(unread & (got != F.lit("null")),
                              F.concat(F.lit(f"{f.name} must be {_TYPE_NAMES[f.type]}, got "), shown)))
    does_not_fit = F.coalesce(
        F.when(~F.expr("is_valid_utf8(line)"), F.lit("not UTF-8 text")),
        F.when(F.col("json").isNull(), F.lit("not JSON")),
        F.when(~F.col("line").rlike(r"^\s*\{"), F.lit("not a JSON object")),
        *misfits,
        F.lit("not JSON or does not fit the event schema"),
    )
    missing = F.array_compact(F.array(*[F.when(F.col(name).isNull(), F.lit(name)) for name in REQUIRED_COLUMNS]))
    return (F.when(F.col(CORRUPT_COLUMN).isNotNull() | ~F.expr("is_valid_utf8(line)"), does_not_fit)
            .when(F.size(missing) == 1, F.concat(F.lit("missing required field "), missing[0]))
            .when(F.size(missing) > 1, F.concat(F.lit("missing required fields "), F.array_join(missing, ", ")))
            .otherwise(F.concat(F.lit("unknown kind '"), F.substring("kind", 1, 80), F.lit("'"))))


def landing_stream(spark: "SparkSession", events_dir: str, settings: CloudSettings, *,
                   two_scans: bool = False) -> "DataFrame":
    """Every landing-zone line once: a de-duplicated valid event, or a rejected line.

    One scan of the text: each line is parsed with ``from_json`` in PERMISSIVE
    mode, so a line that does not fit the schema (or is not JSON) lands in a
    corrupt-record column instead of failing the batch, and the JVM flags the
    lines that are not valid events (corrupt, not UTF-8, a required field
    null, an unknown kind). Every row then goes through one de-duplication
    operator keyed by ``DEDUP_KEY``: an event by its id, with its ingest time
    as event time; a rejected line by a key no other line has, with no event
    time, so it is never dropped as a duplicate or as late and never moves the
    watermark. Rows with ``rejected`` false are events (HISTORY_COLUMNS); the
    others also carry ``line`` and the parser's corrupt-record column, from
    which ``rejected_lines`` says why.
    """
    from pyspark.sql import functions as F

    lines = (spark.readStream
             .option("pathGlobFilter", "*.jsonl")  # closed files only, never *.jsonl.inprogress
             # List date=*/ folders without partition discovery: the schema must not change when
             # the first partition folder appears after the query started.
             .option("recursiveFileLookup", "true")
             .option("maxFilesPerTrigger", settings.spark.max_files_per_trigger)
             # A file deleted between listing and reading cannot be read on any retry: skip it, with
             # Spark's warning naming it, rather than fail the batch forever. Other read errors still
             # fail the batch (no ignoreCorruptFiles: it would also skip the rest of a file on a
             # transient error, losing its events without a trace).
             .option("ignoreMissingFiles", "true")
             .text(events_dir)
             .select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("source_file"))
             .where(F.col("line").rlike(r"\S")))  # blank lines are not records
    schema = event_schema().add(CORRUPT_COLUMN, "string")
    parsed = lines.select("line", "source_file", F.from_json(
        "line", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}).alias("r")
    ).select("line", "source_file", "r.*")
    rejected_if = (F.col(CORRUPT_COLUMN).isNotNull()
                   | ~F.expr("is_valid_utf8(line)")  # the parser would read invalid bytes as U+FFFD
                   | ~F.coalesce(F.col("kind").isin(*TYPE_OF_KIND), F.lit(False)))
    for name in REQUIRED_COLUMNS:
        rejected_if = rejected_if | F.col(name).isNull()
    if two_scans:
        return _two_scan_stream(parsed, rejected_if, settings)
    rejected = F.col("rejected")
    return (parsed.withColumn("rejected", rejected_if)
            .select(*HISTORY_COLUMNS, "rejected",
                    # what only a rejected line needs: null for events, so the shuffle does not carry it
                    F.when(rejected, F.col("source_file")).alias("source_file"),
                    F.when(rejected, F.col("line")).alias("line"),
                    F.when(rejected, F.col(CORRUPT_COLUMN)).alias(CORRUPT_COLUMN),
                    # A rejected line's key: a random UUID, so no two lines, and no line and event, share
                    # a key (a replayed batch starts from the state before it, so new UUIDs do no harm).
                    F.when(rejected, F.concat(F.lit("\u0000rejected "), F.expr("uuid()")))
                    .otherwise(F.col("id")).alias(DEDUP_KEY),
                    F.when(~rejected, F.timestamp_millis(INGEST_TIME)).alias(EVENT_TIME))
            .withWatermark(EVENT_TIME, settings.spark.dedup_horizon)
            .dropDuplicatesWithinWatermark([DEDUP_KEY])
            .drop(EVENT_TIME, DEDUP_KEY))


def _two_scan_stream(parsed: "DataFrame", rejected_if: Any, settings: CloudSettings) -> "DataFrame":
    """The same rows as ``landing_stream`` from the plan of a checkpoint that reads the files twice.

    A checkpoint records the query's sources, and one begun before the single
    scan has two (the events and the rejected lines were each a scan of the
    files, and only the events went through the de-duplication, keyed by id):
    such a checkpoint can only be resumed with that plan.
    """
    from pyspark.sql import functions as F

    text = F.lit(None).cast("string")
    events = (parsed.where(~rejected_if).select(*HISTORY_COLUMNS)
              .withColumn("ingestTs", F.timestamp_millis(INGEST_TIME))
              .withWatermark("ingestTs", settings.spark.dedup_horizon)
              .dropDuplicatesWithinWatermark(["id"])
              .drop("ingestTs")
              .select("*", F.lit(False).alias("rejected"), text.alias("source_file"), text.alias("line"),
                      text.alias(CORRUPT_COLUMN)))
    rejected = parsed.where(rejected_if).select(*HISTORY_COLUMNS, F.lit(True).alias("rejected"), "source_file",
                                                "line", CORRUPT_COLUMN)
    return events.unionByName(rejected)


def checkpoint_reads_twice(spark: "SparkSession", checkpoint: str) -> bool:
    """Whether the checkpoint was begun by a query that read the landing files twice (two sources).

    The newest file of its offset log has a line per source after the version and metadata lines.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    offsets = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/") + "/offsets")
    fs = offsets.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(offsets):
        return False
    batches = [int(s.getPath().getName()) for s in fs.listStatus(offsets) if s.getPath().getName().isdigit()]
    if not batches:
        return False
    reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(
        fs.open(jvm.org.apache.hadoop.fs.Path(offsets, str(max(batches)))), "UTF-8"))
    try:
        lines = 0
        while reader.readLine() is not None:
            lines += 1
    finally:
        reader.close()
    return lines - 2 > 1


def rejected_lines(batch: "DataFrame") -> "DataFrame":
    """The rejected rows of a ``landing_stream`` batch as (source_file, reason, record, record_bytes)."""
    from pyspark.sql import functions as F

    return (batch.where(F.col("rejected"))
            .withColumn("json", F.when(F.col(CORRUPT_COLUMN).isNotNull(), F.expr("try_parse_json(line)")))
            .select("source_file", _rejection_reason().alias("reason"),
                    F.when(F.octet_length("line") <= RECORD_LIMIT_BYTES, F.col("line"))
                    .otherwise(F.expr(f"CAST(substring(CAST(line AS BINARY), 1, {RECORD_LIMIT_BYTES}) AS STRING)"))
                    .alias("record"),
                    F.octet_length("line").cast("long").alias("record_bytes")))


def delay_bucket_column(delay: str) -> Any:
    """SQL twin of ``aggregates.delay_bucket``: the delay cut to three significant digits."""
    from pyspark.sql import functions as F

    scale = f"CAST(pow(10, length(CAST(abs({delay}) AS STRING)) - 3) AS BIGINT)"
    return F.expr(f"CASE WHEN abs({delay}) < 1000 THEN {delay} "
                  f"ELSE CAST(signum({delay}) AS BIGINT) * ((abs({delay}) div {scale}) * {scale}) END")


_GROUPING_SETS: dict[str, tuple[str, ...]] = {
    "m": ("rejected", "kind", "gateway", "pattern", "minute_ms"),
    "b": ("rejected", "kind", "pattern", "variable", "value"),
    "d": ("rejected", "minute_ms", "kind", "bucket_ms"),
    "s": ("rejected", "kind", "gateway", "sensor", "property", "minute_ms"),
}
"""The four aggregates as grouping sets of one group-by: matches per minute, binding values, the delay
histogram, significant per minute. Every set has the kind, and the ``rejected`` flag: Python keeps the
events of the kinds each aggregate counts, and takes the number of rejected lines from the delay set."""
_GROUPING_COLUMNS = ("rejected", "kind", "gateway", "pattern", "minute_ms", "variable", "value", "bucket_ms",
                     "sensor", "property")


def _grouping_id(names: tuple[str, ...]) -> int:
    """Spark's grouping_id() of a grouping set: a 1 bit for each grouping column not in the set."""
    bits = 0
    for name in _GROUPING_COLUMNS:
        bits = (bits << 1) | (name not in names)
    return bits


class AggregateColumns(NamedTuple):
    """The column expressions of ``batch_aggregates``, made once per query and used by every batch.

    Each PySpark function call is a round trip to the JVM that looks ``functions`` up in every
    package PySpark imports, a search through Spark's jars for each miss: some forty of them a
    batch when the expressions were made per batch."""
    rows: tuple[Any, ...]      # the batch's columns, its match bindings exploded alongside
    derived: tuple[Any, ...]   # the delay's bucket, the binding's variable and value, the row's first binding
    sums: tuple[Any, ...]      # the aggregates of every grouping set


def aggregate_columns() -> AggregateColumns:
    from pyspark.sql import functions as F

    c = F.col
    empty = F.lit("")
    one = F.lit(1).cast("long")
    return AggregateColumns(
        rows=("rejected", F.coalesce("gateway", empty).alias("gateway"),
              F.coalesce("pattern", empty).alias("pattern"), "kind",
              F.coalesce("sensor", empty).alias("sensor"), F.coalesce("property", empty).alias("property"),
              F.expr("(windowEnd div 60000) * 60000").alias("minute_ms"),
              (c("ingestTime") - c("windowEnd")).alias("delay"),
              F.posexplode_outer(F.when(~c("rejected") & (c("kind") == "match"), c("bindings"))).alias("pos", "b")),
        derived=(delay_bucket_column("delay").alias("bucket_ms"),
                 F.coalesce("b.variable", empty).alias("variable"), F.coalesce("b.value", empty).alias("value"),
                 (c("pos").isNull() | (c("pos") == 0)).alias("first")),
        sums=(F.grouping_id().cast("long").alias("gid"),
              F.sum(F.when(c("first"), one).otherwise(0)).alias("n"),
              F.sum(F.when(c("pos").isNotNull(), one).otherwise(0)).alias("nb"),
              F.sum(F.when(c("first"), c("delay"))).alias("total"),
              F.min("delay").alias("low"), F.max("delay").alias("high")))


def batch_aggregates(batch: "DataFrame", columns: AggregateColumns | None = None) -> BatchAggregates:
    """One micro-batch's contribution to every aggregate, computed by Spark, collected small.

    ``batch`` is a batch of ``landing_stream``: events and rejected lines. The
    four aggregates are the grouping sets of one group-by (one Spark job, one
    shuffle), over the rows with their bindings exploded alongside (``pos`` is
    the binding's position: only the row of the first binding counts the row
    itself). The same job counts the rejected lines; only a batch that has
    some runs a second job to collect them with their reasons (few, each cut
    to RECORD_LIMIT_BYTES): the reason is a large expression, and most batches
    need none. ``columns``: the expressions (``aggregate_columns``), made here if not given.
    """
    columns = columns or aggregate_columns()
    grouped = (batch.select(*columns.rows).select("*", *columns.derived)
               .groupingSets([list(names) for names in _GROUPING_SETS.values()], *_GROUPING_COLUMNS)
               .agg(*columns.sums))
    ids = {tag: _grouping_id(names) for tag, names in _GROUPING_SETS.items()}
    result = BatchAggregates()
    rejected = 0
    for r in grouped.collect():
        if r.rejected:
            if r.gid == ids["d"]:
                rejected += r.n
        elif r.gid == ids["m"]:
            if r.kind == "match":
                result.matches.append((r.gateway, r.pattern, r.minute_ms, r.n))
        elif r.gid == ids["b"]:
            if r.kind == "match" and r.nb:
                result.bindings.append((r.pattern, r.variable, r.value, r.nb))
        elif r.gid == ids["d"]:
            result.delays.append((r.minute_ms, r.kind, r.bucket_ms, r.n, r.total, r.low, r.high))
            result.rows += r.n  # every event has exactly one delay
        elif r.gid == ids["s"]:
            if r.kind == "significant":
                result.significant.append((r.gateway, r.sensor, r.property, r.minute_ms, r.n))
    if rejected:
        result.rejected = [RejectedRecord(r.source_file or "", r.reason, r.record or "", r.record_bytes or 0)
                           for r in rejected_lines(batch).collect()]
    if any(kind == "instance" for _, kind, *_ in result.delays):
        result.instances = instance_results(batch)
    return result


def instance_results(batch: "DataFrame") -> list[InstanceResult]:
    """The instance events of a ``landing_stream`` batch, as stored (``aggregates.InstanceResult``).

    Collected whole: a gateway sends one per window instance and query (each at most 500 rows),
    so a batch holds a few, not the stream's rate."""
    from pyspark.sql import functions as F

    c = F.col
    picked = (batch.where(~c("rejected") & (c("kind") == "instance") & c("pattern").isNotNull()
                          & c("operator").isNotNull() & c("rows").isNotNull())
              .select("id", "gateway", "pattern", "windowStart", "windowEnd", "operator", "ingestTime",
                      F.to_json("rows").alias("rows")))
    return [InstanceResult(r.id, r.gateway, r.pattern, r.windowStart, r.windowEnd, r.operator,
                           json.dumps([{b["variable"]: b["value"] for b in row if b} for row in json.loads(r.rows)],
                                      ensure_ascii=False, separators=(",", ":")),
                           r.ingestTime, instance_part(r.id, r.gateway, r.pattern, r.windowStart, r.windowEnd,
                                                       r.operator)) for r in picked.collect()]


class AggregateSink:
    """foreachBatch: Parquet history of the events (idempotent overwrite), then SQLite (exactly once).

    SQLite gets the batch's aggregates and its rejected lines in one transaction.
    """

    def __init__(self, database: str, history: str) -> None:
        self.database = database
        self.history = history.rstrip("/")
        self._query_id: str | None = None
        self._query_id_set = threading.Event()
        self._db: Any = None
        self._columns: AggregateColumns | None = None

    def set_query_id(self, query_id: str) -> None:
        """The streaming query's id (stable across restarts from the same checkpoint)."""
        self._query_id = query_id
        self._query_id_set.set()

    def __call__(self, batch: "DataFrame", batch_id: int) -> None:
        if not self._query_id_set.wait(timeout=300):
            raise RuntimeError("streaming query id not set within 300 s")
        assert self._query_id is not None
        from pyspark.sql import functions as F

        started = time.monotonic()
        if self._db is None:
            self._db = open_database(self.database)
            ensure_aggregate_schema(self._db)
        failpoints.crash_at("batch_start", batch_id)
        batch = batch.persist()
        try:
            if self._columns is None:
                self._columns = aggregate_columns()
            partial = batch_aggregates(batch, self._columns)
            if partial.rows == 0 and not partial.rejected:  # a no-data batch (the watermark moved)
                return
            aggregated = time.monotonic()
            if partial.rows:
                writer = batch.where(~F.col("rejected")).select(*HISTORY_COLUMNS).write.mode("overwrite")
                for column in PLAIN_PARQUET_COLUMNS:
                    writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
                writer.parquet(f"{self.history}/events/batch_id={batch_id}")
            written = time.monotonic()
            failpoints.crash_at("before_sqlite", batch_id)
            applied = apply_batch(self._db, self._query_id, batch_id, partial)
            failpoints.crash_at("after_sqlite", batch_id)
        finally:
            batch.unpersist()
        done = time.monotonic()
        log.info("aggregates batch=%d events=%d rejected=%d match_minutes=%d applied=%s aggregate_ms=%d "
                 "parquet_ms=%d sqlite_ms=%d", batch_id, partial.rows, len(partial.rejected), len(partial.matches),
                 "yes" if applied else "no (already committed: replayed batch)", (aggregated - started) * 1000,
                 (written - aggregated) * 1000, (done - written) * 1000)
        if partial.rejected and applied:
            by_reason = partial.rejected_by_reason()
            reasons = "; ".join(f"{reason} x{count}" for reason, count in by_reason[:3])
            more = f"; {len(by_reason) - 3} more reasons" if len(by_reason) > 3 else ""
            log.warning("rejected records batch=%d count=%d files=%d reasons: %s%s (table rejected_records)",
                        batch_id, len(partial.rejected), len({r.source_file for r in partial.rejected}), reasons,
                        more)


_SCANS_BY_QUERY: dict[str, int] = {}
"""How many times the running query with this id reads each landing line (see _two_scan_stream)."""


class ProgressLog:
    """One log line per micro-batch (rows in, rates, duration, de-duplication state), read from
    the query's own progress in the job's main loop.

    Not a StreamingQueryListener: PySpark hands a Python listener each event converted from
    the JVM's objects, iterating every Java map of it to its end, and each end is a Java
    exception that PySpark classifies with a dozen reflective class lookups, each a search
    through Spark's jars: on batches of a hundred-odd events, a sixth of the JVM's CPU samples
    (docs/benchmarks.md, ``bench_cloud.py`` part 5). ``lastProgress`` is one call and
    one JSON document; ``recentProgress`` fills the gap when several batches ended between
    two looks (back-to-back batches of ``--available-now``)."""

    def __init__(self) -> None:
        self._last: tuple[int, str] | None = None     # (batchId, timestamp) of the last progress logged

    def poll(self, query: "StreamingQuery") -> None:
        """Log the progress reports that appeared since the last poll, oldest first."""
        newest = query.lastProgress
        if newest is None or (newest.batchId, newest.timestamp) == self._last:
            return
        reports = [newest]
        if self._last is None or newest.batchId > self._last[0] + 1:
            reports = [p for p in query.recentProgress if self._last is None or p.timestamp > self._last[1]]
        for progress in reports:
            self._log(progress)
            self._last = (progress.batchId, progress.timestamp)

    @staticmethod
    def _log(p: Any) -> None:
        state_rows = sum(op.numRowsTotal for op in (p.stateOperators or []))
        dropped_late = sum(op.numRowsDroppedByWatermark for op in (p.stateOperators or []))
        durations = p.durationMs or {}
        scans = _SCANS_BY_QUERY.get(str(p.id), 1)  # a checkpoint begun with two scans counts each line twice
        log.info("progress batch=%d rows_in=%d input_rows_per_s=%.1f processed_rows_per_s=%.1f "
                 "batch_ms=%s sink_and_state_ms=%s dedup_state_rows=%d dropped_late=%d", p.batchId,
                 p.numInputRows // scans, (p.inputRowsPerSecond or 0.0) / scans,
                 (p.processedRowsPerSecond or 0.0) / scans,
                 durations.get("triggerExecution"), durations.get("addBatch"), state_rows, dropped_late)
        if dropped_late:
            log.warning("dropped late batch=%d events=%d: ingest time older than the de-duplication "
                        "horizon (spark.dedup_horizon) behind the newest seen; not counted (see docs/cloud.md)",
                        p.batchId, dropped_late)


def _is_local(path: str) -> bool:
    return urlparse(path).scheme in ("", "file")


def check_checkpoint(checkpoint: str, db: Any) -> None:
    """Refuse to run a checkpoint against aggregates another checkpoint built.

    A new checkpoint re-reads the whole landing zone; against a database that
    already counted it, every event would be counted twice.
    """
    if not _is_local(checkpoint):
        return
    root = Path(urlparse(checkpoint).path)
    metadata = root / "metadata"
    queries = committed_queries(db)
    if not queries:
        commits = root / "commits"
        if commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir()):
            raise CheckpointMismatch(
                f"checkpoint {checkpoint} has processed batches, but the database has no aggregates from it: "
                f"resuming would leave out everything it already processed. Delete the checkpoint to rebuild "
                f"the aggregates from the landing zone, or restore the database.")
        return
    if not metadata.exists():
        raise CheckpointMismatch(
            f"the database already holds aggregates from streaming query {', '.join(queries)}, but checkpoint "
            f"{checkpoint} is new: running would count the landing zone again. Use the checkpoint that built "
            f"these aggregates, or point `database` at a fresh file.")
    query_id = json.loads(metadata.read_text().splitlines()[0]).get("id")
    if query_id not in queries:
        raise CheckpointMismatch(
            f"checkpoint {checkpoint} belongs to query {query_id}, but the database's aggregates come from "
            f"{', '.join(queries)}")


def preflight(settings: CloudSettings) -> None:
    """Checks that need no Spark: the database opens and belongs with the checkpoint."""
    db = open_database(settings.database)
    try:
        ensure_aggregate_schema(db)
        check_checkpoint(settings.spark.checkpoint, db)
    finally:
        db.conn.close()


def start_query(spark: "SparkSession", settings: CloudSettings, *, available_now: bool = False,
                two_scans: bool | None = None) -> "StreamingQuery":
    """Start the aggregation query on an existing session.

    ``two_scans``: the plan that reads each file twice, which a checkpoint begun with it needs (None: the
    checkpoint's, the single scan for a new one).
    """
    events_path = settings.spark.input
    if events_path is None:
        settings.events_dir.mkdir(parents=True, exist_ok=True)
        events_path = str(settings.events_dir.resolve())
    preflight(settings)
    history = settings.spark.history
    if _is_local(history):
        Path(history).mkdir(parents=True, exist_ok=True)
        history = str(Path(history).resolve())
    sink = AggregateSink(settings.database, history)
    checkpoint = settings.spark.checkpoint
    if _is_local(checkpoint):
        checkpoint = str(Path(checkpoint).resolve())
    if two_scans is None:
        two_scans = checkpoint_reads_twice(spark, checkpoint)
    if two_scans:
        log.warning("checkpoint %s was begun by a query that reads each landing file twice: resuming it with "
                    "that plan (a fresh checkpoint and database read each file once; see docs/cloud.md)",
                    checkpoint)
    writer = (landing_stream(spark, events_path, settings, two_scans=two_scans).writeStream
              .queryName(QUERY_NAME).foreachBatch(sink).option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.spark.trigger_seconds} seconds")
    query = writer.start()
    _SCANS_BY_QUERY[str(query.id)] = 2 if two_scans else 1
    sink.set_query_id(str(query.id))
    return query


def run_job(settings: CloudSettings, *, master: str | None = None, extra_conf: dict[str, str] | None = None,
            available_now: bool = False) -> int:
    """``edgewave-cloud spark``: run the streaming job until SIGTERM/SIGINT (or the input is drained)."""
    log4j = write_log4j_config(Path(settings.spark.checkpoint).parent / "spark-conf"
                               if _is_local(settings.spark.checkpoint) else Path("var/cloud/spark-conf"),
                               settings.spark.log_level)
    preflight(settings)
    conf = spark_conf(settings.spark, log4j.resolve(), extra_conf)
    master = master or settings.spark.master
    log.info("spark job starting master=%s input=%s checkpoint=%s trigger_s=%s", master,
             settings.spark.input or settings.events_dir,
             settings.spark.checkpoint, "available-now" if available_now else settings.spark.trigger_seconds)
    spark = build_session(settings.spark, master, conf)
    stopping = threading.Event()
    stop_on_signals(log, "spark job", stopping.set)
    try:
        query = start_query(spark, settings, available_now=available_now)
        log.info("query started id=%s run=%s", query.id, query.runId)
        progress = ProgressLog()
        try:
            while query.isActive and not stopping.is_set():
                query.awaitTermination(1)
                progress.poll(query)
            if query.isActive:
                query.stop()
            progress.poll(query)
            error = query.exception()
        except Exception as exc:  # StreamingQueryException and friends carry the cause
            error = exc
        log.info("query terminated id=%s exception=%s", query.id, error)
        if error is not None:
            log.error("spark job failed: %s", str(error).splitlines()[0] if str(error) else type(error).__name__)
            return 1
        log.info("spark job stopped")
        return 0
    finally:
        spark.stop()

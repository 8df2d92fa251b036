"""The Spark Structured Streaming job: landing zone -> de-duplicated events -> aggregates.

The query reads the landing zone's closed ``*.jsonl`` files as a file stream
with an explicit schema, drops duplicate events by id (``dropDuplicatesWithinWatermark``
with the watermark on ingest time, so a redelivered event is dropped however
late its match time is, and no event is ever dropped for being late), and hands
each micro-batch to ``AggregateSink``. The sink writes the batch's events to
Parquet (``<history>/events/batch_id=N/``, overwritten if the batch is replayed)
and adds the batch's partial aggregates to SQLite exactly once (see
``aggregates``). The checkpoint holds the file-source log and the de-duplication
state, so a restarted job resumes where it stopped.

Nothing here runs Python on executors (no UDFs), so the same job runs
unchanged on a standalone cluster: only the driver needs Python and SQLite.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .aggregates import BatchAggregates, apply_batch, committed_queries, ensure_aggregate_schema
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


def event_schema() -> Any:
    """The explicit schema of a landing-zone record (an uplink event plus ingestTime)."""
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("id", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("gateway", T.StringType()),
        T.StructField("pattern", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("windowStart", T.LongType()),
        T.StructField("windowEnd", T.LongType()),
        T.StructField("emittedAt", T.LongType()),
        T.StructField("bindings", T.ArrayType(T.StructType([
            T.StructField("variable", T.StringType()),
            T.StructField("value", T.StringType()),
        ]))),
        T.StructField("triples", T.ArrayType(T.StringType())),
        T.StructField("sensor", T.StringType()),
        T.StructField("property", T.StringType()),
        T.StructField("result", T.StringType()),
        T.StructField("ingestTime", T.LongType()),
    ])


HISTORY_COLUMNS = ["id", "type", "gateway", "pattern", "kind", "windowStart", "windowEnd", "emittedAt",
                   "bindings", "triples", "sensor", "property", "result", "ingestTime"]


def event_stream(spark: "SparkSession", events_dir: str, settings: CloudSettings) -> "DataFrame":
    """The de-duplicated stream of landing-zone events."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.schema(event_schema())
           .option("pathGlobFilter", "*.jsonl")  # closed files only, never *.jsonl.inprogress
           # List date=*/ folders without partition discovery: the schema must not change when
           # the first partition folder appears after the query started.
           .option("recursiveFileLookup", "true")
           .option("maxFilesPerTrigger", settings.spark.max_files_per_trigger)
           .json(events_dir))
    return (raw.where(F.col("id").isNotNull() & F.col("windowEnd").isNotNull() & F.col("ingestTime").isNotNull())
            .withColumn("ingestTs", F.timestamp_millis("ingestTime"))
            .withWatermark("ingestTs", settings.spark.dedup_horizon)
            .dropDuplicatesWithinWatermark(["id"]))


def delay_bucket_column(delay: str) -> Any:
    """SQL twin of ``aggregates.delay_bucket``: the delay cut to three significant digits."""
    from pyspark.sql import functions as F

    scale = f"CAST(pow(10, length(CAST(abs({delay}) AS STRING)) - 3) AS BIGINT)"
    return F.expr(f"CASE WHEN abs({delay}) < 1000 THEN {delay} "
                  f"ELSE CAST(signum({delay}) AS BIGINT) * ((abs({delay}) div {scale}) * {scale}) END")


def batch_aggregates(batch: "DataFrame") -> BatchAggregates:
    """One micro-batch's contribution to every aggregate, computed by Spark, collected small.

    The four group-bys are unioned into one narrow result so the batch costs one
    Spark job, not four: each row is tagged with the aggregate it belongs to.
    """
    from pyspark.sql import functions as F

    ev = batch.select(
        F.coalesce("gateway", F.lit("")).alias("gateway"),
        F.coalesce("pattern", F.lit("")).alias("pattern"),
        "kind", "bindings",
        F.coalesce("sensor", F.lit("")).alias("sensor"),
        F.coalesce("property", F.lit("")).alias("property"),
        F.expr("(windowEnd div 60000) * 60000").alias("minute_ms"),
        (F.col("ingestTime") - F.col("windowEnd")).alias("delay"),
    )
    matches = ev.where(F.col("kind") == "match")
    zero, empty = F.lit(0).cast("long"), F.lit("")

    def tagged(tag: str, df: "DataFrame", k1: Any, k2: Any, k3: Any, minute: Any, bucket: Any, count: Any,
               total: Any, low: Any, high: Any) -> "DataFrame":
        return df.select(F.lit(tag).alias("agg"), k1.alias("k1"), k2.alias("k2"), k3.alias("k3"),
                         minute.cast("long").alias("minute"), bucket.cast("long").alias("bucket"),
                         count.cast("long").alias("n"), total.cast("long").alias("total"),
                         low.cast("long").alias("low"), high.cast("long").alias("high"))

    c = F.col
    by_minute = matches.groupBy("gateway", "pattern", "minute_ms").agg(F.count(F.lit(1)).alias("n"))
    by_value = (matches.select("pattern", F.explode("bindings").alias("b"))
                .select("pattern", F.coalesce("b.variable", empty).alias("variable"),
                        F.coalesce("b.value", empty).alias("value"))
                .groupBy("pattern", "variable", "value").agg(F.count(F.lit(1)).alias("n")))
    by_delay = (ev.withColumn("bucket_ms", delay_bucket_column("delay"))
                .groupBy("minute_ms", "kind", "bucket_ms")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("delay").alias("total"), F.min("delay").alias("low"),
                     F.max("delay").alias("high")))
    by_sensor = (ev.where(c("kind") == "significant").groupBy("gateway", "sensor", "property", "minute_ms")
                 .agg(F.count(F.lit(1)).alias("n")))
    rows = (tagged("m", by_minute, c("gateway"), c("pattern"), empty, c("minute_ms"), zero, c("n"), zero, zero, zero)
            .unionByName(tagged("b", by_value, c("pattern"), c("variable"), c("value"), zero, zero, c("n"),
                                zero, zero, zero))
            .unionByName(tagged("d", by_delay, c("kind"), empty, empty, c("minute_ms"), c("bucket_ms"), c("n"),
                                c("total"), c("low"), c("high")))
            .unionByName(tagged("s", by_sensor, c("gateway"), c("sensor"), c("property"), c("minute_ms"), zero,
                                c("n"), zero, zero, zero))
            .collect())
    result = BatchAggregates()
    for r in rows:
        if r.agg == "m":
            result.matches.append((r.k1, r.k2, r.minute, r.n))
        elif r.agg == "b":
            result.bindings.append((r.k1, r.k2, r.k3, r.n))
        elif r.agg == "d":
            result.delays.append((r.minute, r.k1, r.bucket, r.n, r.total, r.low, r.high))
            result.rows += r.n  # every event has exactly one delay
        else:
            result.significant.append((r.k1, r.k2, r.k3, r.minute, r.n))
    return result


class AggregateSink:
    """foreachBatch: Parquet history (idempotent overwrite) then SQLite (exactly once)."""

    def __init__(self, database: str, history: str) -> None:
        self.database = database
        self.history = history.rstrip("/")
        self._query_id: str | None = None
        self._query_id_set = threading.Event()
        self._db: Any = None

    def set_query_id(self, query_id: str) -> None:
        """The streaming query's id (stable across restarts from the same checkpoint)."""
        self._query_id = query_id
        self._query_id_set.set()

    def __call__(self, batch: "DataFrame", batch_id: int) -> None:
        if not self._query_id_set.wait(timeout=300):
            raise RuntimeError("streaming query id not set within 300 s")
        assert self._query_id is not None
        started = time.monotonic()
        if self._db is None:
            self._db = open_database(self.database)
            ensure_aggregate_schema(self._db)
        batch = batch.persist()
        try:
            partial = batch_aggregates(batch)
            if partial.rows == 0:  # a no-data batch (the watermark moved): nothing to count
                return
            aggregated = time.monotonic()
            batch.select(*HISTORY_COLUMNS).write.mode("overwrite").parquet(
                f"{self.history}/events/batch_id={batch_id}")
            written = time.monotonic()
            _failpoint("before_sqlite", batch_id)
            applied = apply_batch(self._db, self._query_id, batch_id, partial)
            _failpoint("after_sqlite", batch_id)
        finally:
            batch.unpersist()
        done = time.monotonic()
        log.info("aggregates batch=%d events=%d match_minutes=%d applied=%s aggregate_ms=%d parquet_ms=%d "
                 "sqlite_ms=%d", batch_id, partial.rows, len(partial.matches),
                 "yes" if applied else "no (already committed: replayed batch)", (aggregated - started) * 1000,
                 (written - aggregated) * 1000, (done - written) * 1000)


def _failpoint(name: str, batch_id: int) -> None:
    """Fault injection for the crash tests: EDGEWAVE_CLOUD_FAILPOINT=<name>:<batch_id> kills the job there.

    SIGKILL, not an exception: the test wants a crash at an exact point of the
    exactly-once protocol, as a power cut would cause it.
    """
    spec = os.environ.get("EDGEWAVE_CLOUD_FAILPOINT")
    if spec and spec == f"{name}:{batch_id}":
        log.warning("failpoint %s reached at batch=%d: killing the job", name, batch_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _progress_listener() -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLog(StreamingQueryListener):
        """One log line per micro-batch: rows in, rates, duration, de-duplication state."""

        def onQueryStarted(self, event: Any) -> None:
            log.info("query started id=%s run=%s", event.id, event.runId)

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            state_rows = sum(op.numRowsTotal for op in (p.stateOperators or []))
            durations = p.durationMs or {}
            log.info("progress batch=%d rows_in=%d input_rows_per_s=%.1f processed_rows_per_s=%.1f "
                     "batch_ms=%s sink_and_state_ms=%s dedup_state_rows=%d", p.batchId, p.numInputRows,
                     p.inputRowsPerSecond or 0.0, p.processedRowsPerSecond or 0.0,
                     durations.get("triggerExecution"), durations.get("addBatch"), state_rows)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            log.info("query terminated id=%s exception=%s", event.id, event.exception)

    return ProgressLog()


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


def start_query(spark: "SparkSession", settings: CloudSettings, *, available_now: bool = False) -> "StreamingQuery":
    """Start the aggregation query on an existing session."""
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
    writer = (event_stream(spark, events_path, settings).writeStream
              .queryName(QUERY_NAME).foreachBatch(sink).option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.spark.trigger_seconds} seconds")
    query = writer.start()
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

    def _stop(signum: int, frame: Any) -> None:
        log.info("spark job stopping signal=%d", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        spark.streams.addListener(_progress_listener())
        query = start_query(spark, settings, available_now=available_now)
        try:
            while query.isActive and not stopping.is_set():
                query.awaitTermination(1)
            if query.isActive:
                query.stop()
            error = query.exception()
        except Exception as exc:  # StreamingQueryException and friends carry the cause
            error = exc
        if error is not None:
            log.error("spark job failed: %s", str(error).splitlines()[0] if str(error) else type(error).__name__)
            return 1
        log.info("spark job stopped")
        return 0
    finally:
        spark.stop()

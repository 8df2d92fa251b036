"""Starting Spark for the cloud job: a Java check, quiet logging, and the session.

Spark 4 needs Java 17 or newer; without it pyspark fails with a long and
unhelpful gateway error, so we check first and say what to install. Spark's
own log output goes through a log4j2 configuration we write next to the
checkpoint (WARN by default), so an operator sees the job's progress lines,
not Spark's chatter.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from .settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17

FILE_SYSTEM_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
"""Spark's checkpoint writer through Hadoop's FileSystem API (the class is pyspark 4's, pinned in pyproject.toml)."""


class JavaMissing(RuntimeError):
    """No usable Java for Spark; the message says what to do."""


def java_executable() -> str | None:
    """The java Spark will use: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def java_major_version(java: str) -> int | None:
    """The major version of ``java`` (8 for 1.8), or None if unreadable.

    From its JDK's ``release`` file when there is one (every JDK since 9, and most 8s, ship
    it beside ``bin/``), which costs no JVM start; else what `java -version` reports (a JVM
    started for it: about a third of a second of CPU at every start of the job)."""
    release = Path(java).resolve().parent.parent / "release"
    try:
        match = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', release.read_text(errors="replace"), re.MULTILINE)
    except OSError:
        match = None
    if match is None:
        try:
            out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """Return the java path, or raise JavaMissing with a clear instruction."""
    java = java_executable()
    hint = ("Spark needs Java 17 or newer: run `make setup` (installs openjdk-17-jre-headless on Debian) "
            "or install a JDK 17+ and set JAVA_HOME")
    if java is None:
        raise JavaMissing(f"java not found (JAVA_HOME unset or invalid, no java on PATH). {hint}")
    major = java_major_version(java)
    if major is None:
        raise JavaMissing(f"could not read the version of {java}. {hint}")
    if major < MIN_JAVA:
        raise JavaMissing(f"{java} is Java {major}. {hint}")
    return java


LOG4J2_TEMPLATE = """\
# Written by edgewave-cloud: Spark's own logging, quiet unless something is wrong.
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
# Known-noisy loggers that warn about normal situations.
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = ERROR
# "AQE is not supported in streaming/stateful workloads": expected, the job is stateful.
logger.aqe1.name = org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream
logger.aqe1.level = ERROR
logger.aqe2.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.aqe2.level = ERROR
# "state for version N doesn't exist in loadedMaps ... normal for the first batch": every restart.
logger.state.name = org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider
logger.state.level = ERROR
# "hostname resolves to a loopback address": normal on a single machine.
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = ERROR
logger.parquet.name = org.apache.parquet
logger.parquet.level = ERROR
logger.procfs.name = org.apache.spark.executor.ProcfsMetricsGetter
logger.procfs.level = ERROR
"""


def write_log4j_config(directory: Path, level: str) -> Path:
    """The log4j2 properties file Spark's JVMs read (driver and, on one machine, executors)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "log4j2.properties"
    text = LOG4J2_TEMPLATE.format(level=level.upper())
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def spark_conf(settings: SparkSettings, log4j: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark configuration of the job: our defaults, then cloud.yaml's conf, then --conf."""
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    conf = {
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if settings.ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.streaming.metricsEnabled": "false",
        # The job caches each micro-batch only until its aggregates and Parquet history are written:
        # compressing the cached columns would cost more CPU than the memory it saves.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Same Python for the driver and any Python worker (the job itself uses none).
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    if urlparse(settings.checkpoint).scheme in ("", "file"):
        # Without Hadoop's native library (pyspark ships none), Spark's default checkpoint writer
        # renames each checkpoint file through Hadoop's FileContext, which starts a `readlink`
        # process for every path it checks: a few dozen processes a micro-batch. The FileSystem
        # writer renames the file with one rename(2), as atomic on a local disk.
        conf["spark.sql.streaming.checkpointFileManagerClass"] = FILE_SYSTEM_CHECKPOINTS
    conf.update(settings.conf)
    conf.update(extra or {})
    return conf


def build_session(settings: SparkSettings, master: str, conf: dict[str, str]) -> "SparkSession":
    """A SparkSession for the job; fails early and clearly without Java 17+."""
    check_java()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(settings.app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level.upper())
    return spark

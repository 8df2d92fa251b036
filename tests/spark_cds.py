"""A class-data-sharing archive of the Spark job's classes, for the JVMs the tests start.

A test's Spark driver loads some 15,000 classes from Spark's jars before its first batch;
the JVM's class-data sharing (CDS) maps them, parsed and verified, from an archive instead,
so each driver starts with a fifth less CPU (about 4 of 20 CPU-seconds for a small job on
two cores). The archive is made once per virtualenv, JDK and pyspark by one run of the real
job (``edgewave-cloud spark --available-now``) over a small landing zone, ending with the
JVM's ``-XX:ArchiveClassesAtExit``; it is kept in the virtualenv (``edgewave-test-cache/``,
about 190 MB). tests/conftest.py starts the making in the background when the first slow
test starts, and adds the archive to ``JAVA_TOOL_OPTIONS`` once it is there; a test that
starts the Spark job through ``cloud_harness.CloudProcess`` meanwhile waits for it
(``wait_for_archive``). Other JVMs started before then, or any JVM whose class path differs
(Spark's launcher, ``java -version``), run as without it. Nothing else changes: the same
Spark, the same job, the same classes.

``python tests/spark_cds.py`` makes the archive in the foreground (and says where).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

# In the virtualenv (``make clean`` removes it with the venv), else in the user's cache.
CACHE = (Path(sys.prefix) if sys.prefix != sys.base_prefix else Path.home() / ".cache") / "edgewave-test-cache"
# Silent when the archive does not apply (another class path: Spark's launcher, java -version).
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_binary() -> Path | None:
    """The java Spark's launcher runs: $JAVA_HOME/bin/java, else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_path(java_options: str) -> Path | None:
    """Where the archive for this JDK, pyspark and these JVM options is (or would be)."""
    java = java_binary()
    if java is None:
        return None
    try:
        modules = java.parent.parent / "lib" / "modules"     # the JDK's class image: changes with the JDK
        stat = modules.stat()
        pyspark = metadata.version("pyspark")
    except (OSError, metadata.PackageNotFoundError):
        return None
    key = "\n".join([str(java), str(stat.st_size), str(stat.st_mtime_ns), pyspark, java_options])
    return CACHE / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def with_archive(java_options: str, archive: Path) -> str:
    return f"{java_options} -XX:SharedArchiveFile={archive} {QUIET}"


def start_making(java_options: str) -> None:
    """Make the archive in a background process unless it is there or being made."""
    archive = archive_path(java_options)
    if archive is None or archive.exists():
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    log = open(CACHE / "make-archive.log", "ab")
    subprocess.Popen([sys.executable, __file__, "--quiet"], stdout=log, stderr=subprocess.STDOUT,
                     stdin=subprocess.DEVNULL, start_new_session=True,
                     env=dict(os.environ, JAVA_TOOL_OPTIONS=java_options))
    log.close()


def wait_for_archive(timeout: float = 120.0) -> None:
    """Before a test starts a Spark JVM: while the archive for ``JAVA_TOOL_OPTIONS`` is being
    made, wait for it, then put it into ``JAVA_TOOL_OPTIONS``. Waiting costs no CPU; a driver
    started without the archive costs about 10 CPU-seconds more (a session's start and a
    first job: 15 instead of 4.5), and on a clean clone the archive takes a minute or so."""
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    archive = archive_path(options) if "-XX:SharedArchiveFile=" not in options else None
    if archive is None:
        return
    if not archive.exists() and (CACHE / "make-archive.lock").exists():
        _wait_for_maker(timeout)
    if archive.exists():
        os.environ["JAVA_TOOL_OPTIONS"] = with_archive(options, archive)


def _wait_for_maker(timeout: float) -> None:
    """Until no process holds the archive's lock (the maker holds it exclusively), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    with open(CACHE / "make-archive.lock", "a") as lock:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.5)
                continue
            fcntl.flock(lock, fcntl.LOCK_UN)
            return


def make(java_options: str) -> Path | None:
    """Make the archive (one maker at a time; another that finds it made does nothing)."""
    archive = archive_path(java_options)
    if archive is None:
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "make-archive.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None                               # another process is making it
        if archive.exists():
            return archive
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.part")
        with tempfile.TemporaryDirectory(prefix="spark-cds-") as work:
            _run_job(Path(work), f"-XX:ArchiveClassesAtExit={partial} {QUIET}")
        if not partial.exists():
            raise RuntimeError(f"the JVM wrote no archive at {partial}")
        for old in CACHE.glob("spark-*.jsa*"):       # archives of another JDK or pyspark
            if old != partial:
                old.unlink(missing_ok=True)
        os.replace(partial, archive)
        return archive


def _run_job(work: Path, dump_option: str) -> None:
    """The real Spark job, once through a small landing zone (every kind of event, a bad line)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cloud_harness import fill_landing_zone, write_config
    from cloud_workload import make_workload

    workload = make_workload(unique=300, duplicates=30, out_of_order=15, gateways=2, seed=5)
    partition = work / "landing" / "events" / "date=2026-01-01"
    fill_landing_zone(partition, workload.sequence)
    (partition / "bad.jsonl").write_text('{"id":\nnot json\n')
    config = write_config(work, spark={"max_files_per_trigger": 2})
    log4j = work / "spark-conf" / "log4j2.properties"          # where the job writes it
    job = subprocess.Popen([sys.executable, "-m", "edgewave.cloud.cli", "--log-level", "WARNING", "spark",
                            "--config", str(config), "--available-now", "--conf",
                            f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j} {dump_option}"],
                           start_new_session=True)
    if job.wait(timeout=600) != 0:
        raise RuntimeError(f"the Spark job exited with {job.returncode}")
    # The driver JVM writes the archive as it exits, after the Python side has: wait for it.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise RuntimeError("the Spark driver did not exit")


if __name__ == "__main__":
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    made = make(options)
    if "--quiet" not in sys.argv:
        print(made or "not made: no java, no pyspark, or another process is making it")

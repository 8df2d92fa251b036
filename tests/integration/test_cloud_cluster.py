"""The same job on a real Spark standalone cluster (master + worker on loopback) gives the exact aggregates,
the ground truth of its workload, to which the local-mode tests hold the job too."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from broker_process import free_port
from cloud_harness import CloudProcess, aggregate_counts, fill_landing_zone, query, wait_for, write_config
from cloud_workload import make_workload

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class Daemon:
    """A Spark standalone daemon (master or worker) started with spark-class."""

    def __init__(self, name: str, args: list[str], workdir: Path) -> None:
        self.log_path = workdir / f"{name}.log"
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_DAEMON_MEMORY="384m", SPARK_WORKER_DIR=str(workdir / "work"),
                   SPARK_LOG_DIR=str(workdir / "logs"), SPARK_NO_DAEMONIZE="1")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=log,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_standalone_cluster_gives_the_exact_aggregates_as_local_mode_does(tmp_path):
    if not (spark_home() / "bin" / "spark-class").exists():
        pytest.fail(f"spark-class not found under {spark_home()}: the pyspark installation is incomplete")
    workload = make_workload(unique=3000, duplicates=300, out_of_order=200, gateways=5, seed=5)
    landing = tmp_path / "shared-storage" / "landing"
    fill_landing_zone(landing / "events", workload.sequence)

    # A standalone cluster: one master, one worker (1 core, 1 GB), both on loopback.
    master_port, worker_ui = free_port(), free_port()
    master = Daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(master_port), "--webui-port", str(free_port())], tmp_path)
    worker = None
    try:
        wait_for(lambda: port_open(master_port), 120, "the Spark master to listen")
        worker = Daemon("worker", ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{master_port}",
                                   "--cores", "1", "--memory", "1g", "--host", "127.0.0.1",
                                   "--webui-port", str(worker_ui)], tmp_path)
        wait_for(lambda: "Registering worker" in master.log(), 120, "the worker to register with the master")
        cluster_dir = tmp_path / "cluster"
        cluster_dir.mkdir()
        cluster_cfg = write_config(cluster_dir, landing_zone=str(landing))
        job = CloudProcess(["spark", "--config", str(cluster_cfg), "--available-now",
                            "--master", f"spark://127.0.0.1:{master_port}",
                            "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                            "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1"],
                           cluster_dir / "job.log", env={"SPARK_LOCAL_IP": "127.0.0.1"})
        assert job.wait(timeout=420) == 0, job.log()[-3000:] + master.log()[-2000:]
        # The work really ran on the worker: it launched an executor for the application.
        assert "Launching executor" in worker.log() or "Asked to launch executor" in worker.log(), worker.log()[-2000:]
    finally:
        if worker is not None:
            worker.stop()
        master.stop()

    db = cluster_dir / "cloud.db"
    assert aggregate_counts(db) == workload.expected_counts()
    assert query(db, "SELECT SUM(rows), SUM(rejected) FROM committed_batches") == [(len(workload.unique), 0)]

"""Nothing the gateway made is lost when the cloud side fails during a fire (tests/fault_rig.py).

The demo scenario's seconds 10-40 (both fires; the room-3 fire from 5 s to 14 s of the run)
go through the whole uplink path on real brokers: gateway broker, ``edgewave-agent run``,
a cloud broker saving its state every 5 s as shipped, and one or three ``edgewave-cloud
ingest`` workers. Each run is checked against the simulator's ground truth, exactly: the
fires landed (deduplicated by event id, as the Spark job counts) are the truth's, room by
room, and every event the agent made (matches and significant observations) landed.

With PUBACK as the end of the gateway's responsibility (``uplink.landed.mode: off``) the
first three faults lose fires (a shared subscription gets nothing queued across a broker
restart; a SIGKILL loses what the broker had not saved): the last test shows it, so that
these tests are known to fail when the acknowledgement does not hold.
"""
from __future__ import annotations

import time

import pytest
from fault_rig import Rig, record_demo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.paced]

START_S, END_S = 10.0, 40.0
IN_FIRE_S = 16.5 - START_S          # inside the room-3 fire (15-24 s of the scenario)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return record_demo(tmp_path_factory.mktemp("recording")).between(START_S, END_S)


def check(outcome) -> None:  # noqa: ANN001
    print(outcome.summary())
    problems = outcome.problems()
    assert not problems, "\n".join([outcome.summary(), *problems])
    assert outcome.faults, "no fault was injected"


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("how", ["term", "kill"], ids=["sigterm", "sigkill"])
def test_cloud_broker_restart_during_a_fire_loses_nothing(tmp_path, recording, how, workers):
    rig = Rig(tmp_path, recording, workers=workers)
    check(rig.run([(IN_FIRE_S, rig.restart_cloud_broker(how, down_s=5.0))]))


def test_ingest_killed_with_acknowledgements_pending_loses_nothing(tmp_path, recording):
    """Ingest dies after fsyncing the second match it lands and before telling the gateway: the
    agent sends the unacknowledged events again; the copy lands too and counts once."""
    rig = Rig(tmp_path, recording)
    outcome = rig.run([], ingest_env={0: {"EDGEWAVE_FAILPOINT": "before_landed_ack:2"}})
    assert any("died" in fault for fault in outcome.faults), outcome.faults
    assert outcome.landed > outcome.distinct            # the re-sent copies landed, and were dropped
    check(outcome)


def test_agent_killed_between_puback_and_landed_acknowledgement_loses_nothing(tmp_path, recording):
    rig = Rig(tmp_path, recording)
    outcome = rig.run([(IN_FIRE_S + 1.5, rig.kill_agent_with_events_unlanded())])
    assert outcome.pending_at_kill
    check(outcome)


def test_without_the_acknowledgement_a_broker_restart_loses_events(tmp_path, recording):
    rig = Rig(tmp_path, recording, workers=3, agent_settings={"uplink": {"landed": {"mode": "off"}}})
    outcome = rig.run([(IN_FIRE_S, rig.restart_cloud_broker("term", down_s=5.0))])
    print(outcome.summary())
    assert outcome.distinct < outcome.made, "the events PUBACKed into the restart's gap were lost"


def test_a_config_ack_the_crashed_broker_lost_is_sent_again_and_resolves_the_push(tmp_path):
    """The agent applied a pushed document and acknowledged it; the cloud broker took the ack
    (PUBACK) and crashed before ingest read it (ingest away, the broker's last save older than
    the ack). After the restart the agent sends its last ack again, and the registry
    records the version as applied, once."""
    from agent_harness import KEY, AgentProcess, Publisher, config_document, push_config, wait_for
    from broker_process import MosquittoBroker
    from cloud_harness import CloudProcess, query, write_config

    local = MosquittoBroker(tmp_path / "local").start()
    cloud = MosquittoBroker(tmp_path / "cloud", autosave_interval_s=3600).start()
    config = write_config(tmp_path, cloud, gateways={"gw1": {"key": KEY}})
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    agent = AgentProcess(tmp_path / "agent", local, cloud)
    publisher = None
    try:
        wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest connected")
        agent.start()
        # the agent's cloud session exists once it connected (start() waits for the local link only)
        wait_for(lambda: "link=cloud event=connected" in agent.log(), 30, "the agent connected to the cloud")
        cloud.stop()                       # saves every session (ingest's queue, the agent's)
        cloud.start()
        wait_for(lambda: ingest.log().count("ingest connected") >= 2, 30, "ingest back")
        wait_for(lambda: agent.log().count("event=connected session_present=True") >= 1, 30, "the agent back")
        time.sleep(1.0)
        assert ingest.stop() == 0          # away: the broker queues for its session, in memory
        publisher = Publisher(cloud, "cloud-pusher")
        push_config(publisher, 2, config_document(2))
        wait_for(lambda: agent.state().get("configVersion") == 2, 30, "version 2 applied")
        time.sleep(1.0)                    # the ack is with the broker, in memory only
        publisher.close()
        publisher = None
        cloud.kill()
        cloud.start()
        ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest2.log")
        database = tmp_path / "cloud.db"
        wait_for(lambda: query(database, "SELECT status FROM config_acks WHERE gateway = 'gw1' AND version = 2"),
                 60, "the ack recorded after the restart")
        assert query(database, "SELECT status FROM config_acks WHERE gateway = 'gw1'") == [("applied",)]
    finally:
        if publisher is not None:
            publisher.close()
        agent.kill()
        if ingest.running:
            ingest.kill9()
        local.kill()
        cloud.kill()

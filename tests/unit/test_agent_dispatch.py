"""The agent's work dispatch: a sensor message is handled on the network thread only when
nothing older is queued, so no message overtakes another, and (persistent local session)
it is acknowledged only once handled, in arrival order (see runtime.py)."""
from __future__ import annotations

from edgewave.agent.config import settings_from_dict
from edgewave.agent.pipeline import Handled
from edgewave.agent.runtime import Agent, ConfigDocument, SensorMessage, Stop


def stored_agent(tmp_path, settings: dict | None = None) -> Agent:  # noqa: ANN001
    """An agent with its storage open (outbox, journal, writer), no network."""
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), **(settings or {})}))
    agent.open_storage()
    return agent


def recording_agent(tmp_path, settings: dict | None = None) -> tuple[Agent, list]:  # noqa: ANN001
    """An agent whose pipeline and config application only record what reaches them."""
    agent = stored_agent(tmp_path, settings)
    handled: list = []

    def handle(topic: str, payload: bytes, arrival_ms: int, ack=None) -> Handled:  # noqa: ANN001
        handled.append(payload)
        return Handled((), () if ack is None else (ack,), None)

    def apply_pushed(payload: bytes) -> tuple:
        handled.append(payload)
        return ()

    agent.pipeline.handle = handle
    agent.configs.apply_pushed = apply_pushed
    return agent, handled


def test_idle_agent_handles_a_message_at_once(tmp_path) -> None:
    agent, handled = recording_agent(tmp_path)
    agent._on_sensor_message("ew/in/alarm/s1", b"m1", False, None)
    assert handled == [b"m1"] and agent._work.empty() and agent._backlog == 0


def test_a_message_behind_queued_work_waits_for_it(tmp_path) -> None:
    agent, handled = recording_agent(tmp_path)
    agent._on_cloud_message(f"ew/{agent.gateway}/config", b"config", False, None)   # the engine thread's
    agent._on_sensor_message("ew/in/alarm/s1", b"m1", False, None)                  # behind the config
    assert handled == [] and agent._backlog == 2
    agent._work_once(agent._work.get_nowait())                                      # the config is done ...
    agent._on_sensor_message("ew/in/alarm/s1", b"m2", False, None)                  # ... but m1 is still queued
    assert handled == [b"config"]
    while not agent._work.empty():
        agent._work_once(agent._work.get_nowait())
    assert handled == [b"config", b"m1", b"m2"] and agent._backlog == 0
    agent._on_sensor_message("ew/in/alarm/s1", b"m3", False, None)                  # nothing queued: at once
    assert handled[-1] == b"m3" and agent._work.empty()


def test_a_full_queue_drops_and_counts_without_blocking(tmp_path) -> None:
    agent = stored_agent(tmp_path, {"input": {"queue_max": 2}})
    agent.configs.apply_pushed = lambda payload: ()
    agent._on_cloud_message(f"ew/{agent.gateway}/config", b"config", False, None)
    for n in range(3):
        agent._on_sensor_message("ew/in/alarm/s1", b"m%d" % n, False, None)
    assert agent.counters["queue_full"] == 2 and agent._backlog == 2
    assert [type(item) for item in list(agent._work.queue)] == [ConfigDocument, SensorMessage]


def test_acknowledgements_follow_handling_in_arrival_order(tmp_path) -> None:
    agent, handled = recording_agent(tmp_path)
    acked: list = []

    def ack(name: bytes):
        return lambda: acked.append((name, name in handled))   # (message, handled by then?)

    agent._on_sensor_message("ew/in/alarm/s1", b"m1", False, ack(b"m1"))
    agent._on_cloud_message(f"ew/{agent.gateway}/config", b"config", False, None)
    agent._on_sensor_message("ew/in/alarm/s1", b"m2", False, ack(b"m2"))            # queued: not yet
    agent._on_sensor_message("ew/in/alarm/s1", b"m3", False, ack(b"m3"))
    assert acked == [(b"m1", True)]
    while not agent._work.empty():
        agent._work_once(agent._work.get_nowait())
    agent._on_sensor_message("ew/in/alarm/s1", b"m4", False, ack(b"m4"))
    assert acked == [(b"m1", True), (b"m2", True), (b"m3", True), (b"m4", True)]


def test_a_message_awaiting_acknowledgement_is_queued_even_beyond_queue_max(tmp_path) -> None:
    """Acknowledging a dropped QoS 1 message would lose it; the broker's Receive Maximum
    (queue_max unacknowledged) bounds these instead. Without an ack (QoS 0) it is dropped."""
    agent, handled = recording_agent(tmp_path, {"input": {"queue_max": 1}})
    agent._on_cloud_message(f"ew/{agent.gateway}/config", b"config", False, None)
    acked: list = []
    for name in (b"m1", b"m2"):
        agent._on_sensor_message("ew/in/alarm/s1", name, False, lambda name=name: acked.append(name))
    agent._on_sensor_message("ew/in/alarm/s1", b"q0", False, None)
    assert acked == [] and agent.counters["queue_full"] == 1 and agent._backlog == 3
    while not agent._work.empty():
        agent._work_once(agent._work.get_nowait())
    assert handled == [b"config", b"m1", b"m2"] and acked == [b"m1", b"m2"]


def test_stream_time_moves_by_the_clock_only_while_no_message_arrives(tmp_path) -> None:
    """The engine thread's idle tick (every 0.5 s of an empty queue) must not take the engine
    lock to advance windows while sensor messages keep the clock moving themselves: under
    load that pause was the latency tail. Once they stop, it advances windows by the clock."""
    import threading
    import time

    from edgewave.agent.pipeline import IDLE_ADVANCE_MS

    agent = stored_agent(tmp_path)                     # no config: an engine without patterns
    advanced: list[int] = []
    arrivals: list[int] = []
    real_advance = agent.pipeline.engine.advance
    agent.pipeline.engine.advance = lambda now: (advanced.append(now), real_advance(now))[1]
    real_handle = agent.pipeline.handle
    agent.pipeline.handle = lambda topic, payload, arrival_ms, ack=None: (
        arrivals.append(arrival_ms), real_handle(topic, payload, arrival_ms, ack))[1]
    worker = threading.Thread(target=agent._work_loop, daemon=True)
    worker.start()
    try:
        busy_until = time.monotonic() + 3 * IDLE_ADVANCE_MS / 1000
        while time.monotonic() < busy_until:          # handled on this ("network") thread
            agent._on_sensor_message("ew/in/alarm/s1", b"<http://ex.org/a> <http://ex.org/b> 1 .", False, None)
            time.sleep(0.02)
        assert agent.counters["messages_in"] > 50
        # Every advance (none, unless a loaded machine held this thread back for half a
        # second) came after half a second without a message.
        for now in advanced:
            assert max((a for a in arrivals if a <= now), default=0) <= now - IDLE_ADVANCE_MS, (now, arrivals)
        advanced.clear()
        last_arrival = agent.pipeline.last_arrival_ms
        deadline = time.monotonic() + 4 * IDLE_ADVANCE_MS / 1000
        while not advanced and time.monotonic() < deadline:
            time.sleep(0.05)
        assert advanced and advanced[0] >= last_arrival + IDLE_ADVANCE_MS
        assert agent.pipeline.last_arrival_ms == advanced[-1]  # later arrivals are clamped to it
    finally:
        agent._enqueue(Stop())
        worker.join(5)

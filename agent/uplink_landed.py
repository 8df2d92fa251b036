"""The uplink's messages that the cloud broker took (PUBACK) and ingest has not yet landed.

A PUBACK means the cloud broker holds a message, in memory until its next autosave, and
with a shared subscription not even across a clean restart; ingest's acknowledgement
(shared/landed_acks.py) means the events are fsynced into the landing zone. Between the
two a message is *sent*: its rows stay in the outbox, counted by its bounds, and this
class remembers it, in memory only (after an agent restart every row is sent again, which
the cloud's deduplication by event id makes harmless, and no write per PUBACK wears the
SD card). It decides three things for the uplink (uplink.py):

- whether a PUBACK deletes (``end_to_end`` false: mode ``off``, or ``auto`` with a cloud
  that has never acknowledged anything and made events wait ``older_cloud_after_s``);
- whether there is room to publish more (``room``: at most ``max_unlanded`` events sent
  and not landed, so an ingest outage fills the outbox, not the broker's queues);
- when to send again (``overdue``): a sent message not landed within ``resend_after_s``;
  the wait doubles each time it passes with nothing landed, up to ``max_resend_after_s``,
  and is back to ``resend_after_s`` once something lands.

That the cloud acknowledges is kept in the outbox file (a flag), so an agent that has once
seen an acknowledgement never falls back to PUBACK after a restart.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from edgewave.agent.config import LANDED_AUTO, LANDED_OFF, LANDED_REQUIRED, UplinkLandedSettings
from edgewave.agent.outbox import Outbox
from edgewave.shared.landed_acks import message_key, parse_message_key

log = logging.getLogger("edgewave.agent.uplink")

CLOUD_LANDS = "cloud_lands"
"""The outbox flag: this cloud has acknowledged landed events at least once."""


@dataclass
class Sent:
    first: int                       # outbox seq of the message's first and last row
    last: int
    events: int
    at: float                        # monotonic time of its PUBACK


class LandedAcks:
    """Sent-but-not-landed messages by key, oldest first."""

    def __init__(self, settings: UplinkLandedSettings, outbox: Outbox) -> None:
        self.settings = settings
        self.outbox = outbox
        self.mode = settings.mode
        self.cloud_lands = outbox.flag(CLOUD_LANDS)
        self.older_cloud = False              # auto: taken for a cloud without acknowledgements
        self._sent: dict[bytes, Sent] = {}    # insertion order: oldest PUBACK first
        self.events = 0                       # events in ``_sent``
        self.wait_s = settings.resend_after_s
        self.landed = 0                       # events whose landing was acknowledged (counter)
        self.resends = 0                      # times the unlanded events were sent again (counter)

    # -- what the uplink asks ----------------------------------------------------------------
    @property
    def end_to_end(self) -> bool:
        """A PUBACK keeps the rows (True) or deletes them (False)."""
        if self.mode == LANDED_OFF:
            return False
        return self.mode == LANDED_REQUIRED or self.cloud_lands or not self.older_cloud

    def key(self, first: int, last: int) -> bytes:
        """The Correlation Data of a message carrying rows ``first``..``last``."""
        return message_key(self.outbox.outbox_id, first, last)

    def room(self, inflight_events: int) -> int:
        """How many more events may be published before acknowledgements come back."""
        if not self.end_to_end:
            return 1 << 30
        return self.settings.max_unlanded - self.events - inflight_events

    def oldest_age_s(self, now: float | None = None) -> float | None:
        """How long the oldest sent message has waited (the status thread asks, unlocked)."""
        try:
            oldest = next(iter(self._sent.values()))
        except (StopIteration, RuntimeError):
            return None
        return max(0.0, (time.monotonic() if now is None else now) - oldest.at)

    def state(self) -> str:
        """For the status: end_to_end, puback (mode off) or older_cloud (auto fell back)."""
        if self.mode == LANDED_OFF:
            return "puback"
        return "end_to_end" if self.end_to_end else "older_cloud"

    # -- what happens ------------------------------------------------------------------------
    def sent(self, key: bytes, first: int, last: int, events: int, now: float) -> None:
        """The broker took a message (PUBACK)."""
        if key in self._sent:               # sent again before the first copy landed
            self.events -= self._sent.pop(key).events
        self._sent[key] = Sent(first, last, events, now)
        self.events += events

    def landed_ranges(self, keys: list[str]) -> list[tuple[int, int]]:
        """Ingest landed the messages of ``keys``: the outbox ranges to delete (keys of another
        outbox file, or not the agent's, are ignored)."""
        ranges = []
        for text in keys:
            parsed = parse_message_key(text)
            if parsed is None or parsed[0] != self.outbox.outbox_id:
                continue
            sent = self._sent.pop(text.encode("ascii"), None)
            if sent is not None:
                self.events -= sent.events
                self.landed += sent.events
            ranges.append((parsed[1], parsed[2]))
        if ranges:
            self.wait_s = self.settings.resend_after_s
            if not self.cloud_lands and self.mode == LANDED_AUTO:
                if self.older_cloud:
                    log.warning("uplink event=landed_acks_resumed action='events deleted once landed again'")
                self.older_cloud = False
                self.outbox.set_flag(CLOUD_LANDS)
            self.cloud_lands = True
        return ranges

    def overdue(self, now: float) -> bool:
        """Whether the oldest sent message waited too long for its acknowledgement. Messages whose
        rows are all gone (landed through another copy) are forgotten on the way."""
        while self._sent:
            key, oldest = next(iter(self._sent.items()))
            if now - oldest.at < self.wait_s:
                return False
            if self.outbox.holds_between(oldest.first, oldest.last):
                return True
            del self._sent[key]
            self.events -= oldest.events
        return False

    def resending(self) -> int | None:
        """Everything sent is about to be published again: forget it (the copies are tracked
        anew) and back off the next wait. Returns the lowest seq sent, None when nothing was."""
        if not self._sent:
            return None
        low = min(s.first for s in self._sent.values())
        self.resends += 1
        self.wait_s = min(self.wait_s * 2, self.settings.max_resend_after_s)
        self.forget()
        return low

    def forget(self) -> None:
        self._sent.clear()
        self.events = 0

    def gives_up(self, now: float) -> list[tuple[int, int]]:
        """``auto`` with a cloud that has never acknowledged: once events waited
        ``older_cloud_after_s``, take it for an older cloud and delete what it holds (the
        ranges returned), as on PUBACK."""
        if self.mode != LANDED_AUTO or self.cloud_lands or self.older_cloud or not self._sent:
            return []
        if now - next(iter(self._sent.values())).at < self.settings.older_cloud_after_s:
            return []
        self.older_cloud = True
        ranges = [(s.first, s.last) for s in self._sent.values()]
        log.warning("uplink event=no_landed_acks waited_s=%.0f action='an older cloud: events deleted on PUBACK "
                    "from now on (uplink.landed.mode)'", self.settings.older_cloud_after_s)
        self.forget()
        return ranges

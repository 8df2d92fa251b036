"""Which keys verify a config document, through a key rotation.

Normally one key (``config.key`` / ``config.key_file``). During a rotation
(``edgewave-cloud gateway rotate-key``) the gateway also holds the cloud's next key
(``config.next_key_file``) and the end of the overlap (``config.key_overlap_until``):

- before the switch, a document signed with either key verifies;
- the first document for this gateway whose signature verifies with the next key
  switches the agent to it for good: the switch is remembered in ``<data_dir>/config-key.json``, logged
  (``event=key_switched``), and the ack and status carry the next key's id;
- once switched, or once the overlap has ended, only the next key verifies.

Keys are read from their files when the keyring is made (at start and on SIGHUP's
reload); only their ids (shared/config_keys.py) are ever logged.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from edgewave.shared import clock
from edgewave.agent.config import AgentSettings, SettingsError
from edgewave.shared.config_keys import key_id, parse_time
from edgewave.shared.configdoc import ConfigRejected, verify_envelope
from edgewave.shared.secret_files import write_private

log = logging.getLogger("edgewave.agent.keyring")

STATE_FILE = "config-key.json"


class Keyring:
    """The current key, the next one during a rotation, and whether the agent has switched."""

    def __init__(self, settings: AgentSettings) -> None:
        self.gateway = settings.gateway
        self.current = settings.config_key()
        self.next: bytes | None = None
        self.overlap_until: float | None = None
        self.state_path = settings.data_path(STATE_FILE)
        if settings.config.next_key_file:
            self.next = Path(settings.config.next_key_file).read_text().strip().encode()
            if not self.next:
                raise SettingsError(f"config.next_key_file {settings.config.next_key_file} is empty")
            if settings.config.key_overlap_until:
                try:
                    self.overlap_until = parse_time(settings.config.key_overlap_until)
                except ValueError as exc:
                    raise SettingsError(f"config.key_overlap_until: not an ISO 8601 time: "
                                        f"{settings.config.key_overlap_until!r}") from exc
        self.switched = self.next is not None and self._remembered() == key_id(self.next)

    def _remembered(self) -> str | None:
        try:
            return json.loads(self.state_path.read_text()).get("keyId")
        except (OSError, ValueError, AttributeError):
            return None

    def accepted(self, now: float | None = None) -> list[bytes]:
        """The keys a document may be signed with right now, the one to prefer first."""
        if self.next is None:
            return [self.current]
        now = time.time() if now is None else now
        if self.switched or (self.overlap_until is not None and now >= self.overlap_until):
            return [self.next]
        return [self.current, self.next]

    @property
    def active_id(self) -> str:
        """The id of the key the agent holds as its own (the next one once switched)."""
        return key_id(self.next if self.switched and self.next else self.current)

    def key_for(self, payload: bytes) -> tuple[bytes, bool]:
        """The accepted key that verifies ``payload``'s signature, and True; or the first
        accepted key and False when none does (verifying with it gives the real complaint)."""
        keys = self.accepted()
        for key in keys:
            try:
                verify_envelope(payload, key, gateway=self.gateway)
                return key, True
            except ConfigRejected:
                continue
        return keys[0], False

    def note_verified(self, key: bytes) -> bool:
        """A document for this gateway verified with ``key``: the first one signed with the
        next key switches the agent to it. True when this call switched."""
        if self.next is None or self.switched or key != self.next:
            return False
        self.switched = True
        try:
            write_private(self.state_path, json.dumps({"keyId": key_id(self.next),
                                                       "switchedAt": clock.now_ms()}) + "\n")
        except OSError as exc:
            log.error("config event=key_switch_not_persisted key_id=%s error=%r "
                      "consequence='after a restart the old key verifies again until the overlap ends'",
                      key_id(self.next), str(exc))
        log.warning("config event=key_switched from_key_id=%s to_key_id=%s", key_id(self.current), key_id(self.next))
        return True

    def describe(self) -> dict[str, object]:
        """For the status document: the key ids, never the keys."""
        doc: dict[str, object] = {"keyId": self.active_id}
        if self.next is not None:
            doc.update(nextKeyId=key_id(self.next), switched=self.switched,
                       overlapUntil=int(self.overlap_until * 1000) if self.overlap_until else None)
        return doc

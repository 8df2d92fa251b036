"""One simulated run: config + optional scenario -> messages in time order, and their ground truth.

``record`` and ``run`` are the same simulation sent to different places (a file at full
speed, a broker at the sim clock's pace), so what was recorded is what would have been
published. The config's payload ``format`` only changes how each reading is written
(payload_formats.py): the readings, and so the ground truth, are the same in every format.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import IO, Iterator

from .config import SimConfig
from .fleet import Message, build_sites, fleet_readings
from .observation import Reading
from .payload_formats import encoder
from .scenario import Injection, Scenario, inject
from .site import Site
from .truth import ExpectedInstance, ExpectedMatch, background_hazards, ground_truth, instance_truth, \
    scenario_query_truth

log = logging.getLogger("edgewave.firmware_sim.simulation")


@dataclass
class Simulation:
    config: SimConfig
    scenario: Scenario | None = None
    gateways: list[str] | None = None
    duration_s: float | None = None
    keep_readings: bool = False
    sites: list[Site] = field(init=False)
    injection: Injection = field(init=False)
    readings: list[Reading] = field(init=False, default_factory=list)
    messages_out: int = field(init=False, default=0)
    lines_out: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.sites = build_sites(self.config, self.gateways)
        for site in self.sites:
            for hazard in background_hazards(site):
                log.warning("background_may_match gateway=%s reason=%r", site.gateway, hazard)
        if self.duration_s is None:
            scenario_s = self.scenario.duration_s if self.scenario else None
            self.duration_s = scenario_s if scenario_s else self.config.duration_s
        self.injection = inject(self.scenario, self.sites, self.config.start_ms) if self.scenario else Injection()

    def messages(self) -> Iterator[Message]:
        """The run's messages in time order (lazily; an endless run when duration is None)."""
        keep = self.keep_readings
        to_message = encoder(self.config.format)
        for reading in fleet_readings(self.config, self.sites, duration_s=self.duration_s,
                                      injected=self.injection.readings, pauses=self.injection.pauses):
            if keep:
                self.readings.append(reading)
            message = to_message(reading)
            self.messages_out += 1
            self.lines_out += len(message.lines)
            yield message

    def truth(self, scenario_queries: bool = False) -> list[ExpectedMatch]:
        """The ground truth over what ``messages()`` produced (needs keep_readings): of the
        shipped patterns, or of the queries kept beside the scenarios."""
        if not self.keep_readings:
            raise RuntimeError("ground truth needs keep_readings=True before messages() runs")
        return (scenario_query_truth if scenario_queries else ground_truth)(self.sites, self.readings)

    def instance_truth(self) -> list[ExpectedInstance]:
        """What the per-instance queries must yield per window instance (needs keep_readings)."""
        if not self.keep_readings:
            raise RuntimeError("ground truth needs keep_readings=True before messages() runs")
        return instance_truth(self.sites, self.readings, self.injection.silences)

    def write_truth(self, fh: IO[str], scenario_queries: bool = False) -> int:
        name = self.scenario.name if self.scenario else "background"
        rows = self.truth(scenario_queries)
        for row in rows:
            fh.write(json.dumps(row.to_json(self.config.start_ms, name), sort_keys=True) + "\n")
        return len(rows)

    def write_instance_truth(self, fh: IO[str]) -> int:
        """One JSON line per window instance and query; kept apart from the matches' truth,
        whose readers expect one match per line."""
        name = self.scenario.name if self.scenario else "background"
        rows = self.instance_truth()
        for row in rows:
            fh.write(json.dumps(row.to_json(self.config.start_ms, name), sort_keys=True) + "\n")
        return len(rows)

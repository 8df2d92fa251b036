"""A gateway's site: the building, its rooms and sensors, residents, people, and the
static triples an agent joins observations against.

The site is built from the config (one template, per-gateway overrides), so the
simulator's sensors, the static data (``edgewave-sim static``) and the ground truth
all come from one description and cannot drift apart. Every threshold a pattern uses
is a static triple here, so changing it is a config change, not a new network.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from edgewave.shared import vocab
from edgewave.shared.decimal_lexical import decimal_lexical
from edgewave.shared.ntriples import make_literal
from edgewave.shared.topics import sensor_topic

from . import domain
from .config import GatewaySettings
from .sensors import KINDS, SensorKind

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class SensorSpec:
    """One physical sensor: where it is, what it observes, how its firmware speaks."""

    gateway: str
    local: str                  # "room3-smoke", unique on the gateway
    kind: SensorKind
    dialect: str                # sosa | acme | medisense
    feature_of_interest: str    # the room or the person, an IRI term
    place: str                  # room key ("room3") or person name

    @property
    def iri(self) -> str:
        return domain.site_iri(self.gateway, "sensor", self.local)

    @property
    def sensor_id(self) -> str:
        """The topic's sensor segment: unique across gateways sharing one broker."""
        return f"{self.gateway}-{self.local}"

    @property
    def topic(self) -> str:
        return sensor_topic(self.kind.stream, self.sensor_id)

    @property
    def sensor_class(self) -> str:
        return self.kind.vendor_classes.get(self.dialect, self.kind.sensor_class)


@dataclass(frozen=True)
class Patient:
    name: str
    iri: str
    heart_rate_upper_limit: float
    breathing_rate_lower_limit: float
    minimum_confidence: float


@dataclass(frozen=True)
class Person:
    name: str
    iri: str
    home: tuple[float, float]   # latitude, longitude
    nearby_within_degrees: float


@dataclass
class Site:
    """Everything about one gateway's premises that the simulator and the ground truth need."""

    gateway: str
    index: int
    building: str
    armed: bool
    fire_temperature_threshold: float
    position: tuple[float, float]
    home_radius: float
    rooms: dict[str, str] = field(default_factory=dict)          # key -> IRI
    sensors: list[SensorSpec] = field(default_factory=list)
    patients: dict[str, Patient] = field(default_factory=dict)
    people: dict[str, Person] = field(default_factory=dict)
    friends: list[tuple[str, str]] = field(default_factory=list)  # (knower, known)

    def sensor(self, local: str) -> SensorSpec:
        for spec in self.sensors:
            if spec.local == local:
                return spec
        raise KeyError(f"no sensor {local!r} on {self.gateway} (e.g. {', '.join(s.local for s in self.sensors[:4])})")

    def room_sensor(self, room: str, kind: str) -> SensorSpec:
        return self.sensor(f"{room}-{kind}")

    def static_triples(self) -> list[Triple]:
        """The site's static data: layout, sensor inventory, parameters patterns join against."""
        gw = self.gateway
        dec = vocab.XSD_DECIMAL
        t: list[Triple] = [
            (self.building, vocab.RDF_TYPE, domain.BUILDING),
            (self.building, vocab.RDFS_LABEL, make_literal(f"residence of gateway {gw}")),
            (self.building, domain.ARMED, make_literal("true" if self.armed else "false", vocab.XSD_BOOLEAN)),
            (self.building, domain.FIRE_TEMPERATURE_THRESHOLD,
             make_literal(_num(self.fire_temperature_threshold), dec)),
        ]
        for room in self.rooms.values():
            t.append((room, vocab.RDF_TYPE, domain.ROOM))
            t.append((room, domain.IN_BUILDING, self.building))
        for patient in self.patients.values():
            home = domain.site_iri(gw, f"home-{patient.name}")
            t += [
                (patient.iri, vocab.RDF_TYPE, domain.PATIENT),
                (patient.iri, domain.LIVES_IN, home),
                (home, vocab.RDF_TYPE, domain.HOME),
                (home, domain.IN_BUILDING, self.building),
                (patient.iri, domain.HEART_RATE_UPPER_LIMIT, make_literal(_num(patient.heart_rate_upper_limit), dec)),
                (patient.iri, domain.BREATHING_RATE_LOWER_LIMIT,
                 make_literal(_num(patient.breathing_rate_lower_limit), dec)),
                (patient.iri, domain.MINIMUM_CONFIDENCE, make_literal(_num(patient.minimum_confidence), dec)),
            ]
        for person in self.people.values():
            t.append((person.iri, vocab.RDF_TYPE, domain.FOAF_PERSON))
            t.append((person.iri, domain.NEARBY_WITHIN_DEGREES, make_literal(_num(person.nearby_within_degrees), dec)))
        for knower, known in self.friends:
            t.append((self.people[knower].iri, domain.FOAF_KNOWS, self.people[known].iri))
        for spec in self.sensors:
            t.append((spec.iri, vocab.RDF_TYPE, spec.sensor_class))
            t.append((spec.iri, vocab.SOSA_OBSERVES, spec.kind.observed_property))
            if spec.kind.stream == "building":
                t.append((spec.iri, domain.LOCATED_IN, spec.feature_of_interest))
            else:
                t.append((spec.iri, domain.WORN_BY, spec.feature_of_interest))
        return t


def _num(value: float) -> str:
    return decimal_lexical(float(value))


def build_site(gw: GatewaySettings) -> Site:
    """The site of one gateway from its settings."""
    cfg = gw.site
    lat0, long0 = (float(v) for v in cfg["position"])
    position = (round(lat0 + 0.5 * gw.index, 6), long0)
    site = Site(
        gateway=gw.id,
        index=gw.index,
        building=domain.site_iri(gw.id, "building"),
        armed=bool(cfg["armed"]),
        fire_temperature_threshold=float(cfg["fire_temperature_threshold"]),
        position=position,
        home_radius=float(cfg["home_radius_degrees"]),
    )
    acme_rooms = set(int(r) for r in cfg.get("acme_rooms") or [])
    for number in range(1, cfg["rooms"] + 1):
        key = f"room{number}"
        site.rooms[key] = domain.site_iri(gw.id, key)
        dialect = "acme" if number in acme_rooms else "sosa"
        for kind in cfg["room_sensors"]:
            site.sensors.append(SensorSpec(gw.id, f"{key}-{kind}", KINDS[kind], dialect, site.rooms[key], key))
    for p in cfg["patients"]:
        name = p["name"]
        iri = domain.site_iri(gw.id, name)
        site.patients[name] = Patient(
            name, iri,
            float(p.get("heart_rate_upper_limit", 100)),
            float(p.get("breathing_rate_lower_limit", 10)),
            float(p.get("minimum_confidence", 0.8)),
        )
        dialect = p.get("vendor", "sosa")
        for kind in p.get("wearables", []):
            site.sensors.append(SensorSpec(gw.id, f"{name}-{kind}", KINDS[kind], dialect, iri, name))
    for p in cfg["people"]:
        name = p["name"]
        d_lat, d_long = (float(v) for v in p["home"])
        home = (round(position[0] + d_lat, 6), round(position[1] + d_long, 6))
        person = Person(name, domain.site_iri(gw.id, name), home, float(cfg["nearby_within_degrees"]))
        site.people[name] = person
        site.sensors.append(SensorSpec(gw.id, f"{name}-location", KINDS["location"], "sosa", person.iri, name))
    site.friends = [(a, b) for a, b in cfg["friends"]]
    return site

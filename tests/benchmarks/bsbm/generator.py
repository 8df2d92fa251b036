"""Generate the Sparkwave paper's BSBM-derived workload (section 4).

* **Schema**: a single-rooted product-type hierarchy, ``rdfs:subClassOf`` only. ``small``
  has 329 classes in 4 levels (root + 3: 1, 8, 40, 280), ``large`` 22,527 classes in 6
  levels (1, 6, 216, 544, 2,720, 19,040). In both, the *target type* the patterns ask for
  has exactly 40 subclasses (5 children with 7 leaves each), like the paper's.
* **Stream**: one offer per millisecond of stream time; per offer 10 offer triples
  (``rdf:type bsbm-voc:Offer``, product, vendor, price, validFrom, validTo, deliveryDays,
  offerWebpage, dc:publisher, dc:date) and the product's ``rdf:type`` triple with its leaf
  type (the paper's footnote 9), all with the offer's timestamp. Without entailment the
  stream also carries the product's type triples for every ancestor of its leaf type
  (the paper's "second stream").
* **Products** are drawn from a fixed pool of 1,000 (so the same product's type triple
  comes again with each of its offers, as in BSBM); a product's leaf type is under the
  target with probability 1/8 (the share the 329-class schema gives naturally), in both
  schemas, so that only the schema size differs between them.
* **Static data** for patterns 2 and 3: 10,000 triples: vendor countries, product
  producers and producer countries.

Everything is deterministic for a given seed and generated lazily (10 million triples
need not touch the disk).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

VOC = "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/vocabulary/"
INST = "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/instances/"
DC = "http://purl.org/dc/elements/1.1/"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
XSD = "http://www.w3.org/2001/XMLSchema#"
COUNTRIES = "http://downlode.org/rdf/iso-3166/countries#"
STREAM_IRI = "http://bsbm.org/stream"

LEVELS = {
    "small": (1, 8, 40, 280),
    "large": (1, 6, 216, 544, 2720, 19040),
}
PRODUCTS = 1000
VENDORS = 4750
PRODUCERS = 4750
TARGET_SHARE = 1 / 8
COUNTRY_CODES = ("GB", "DE", "US", "FR", "AT", "JP", "CN", "ES")


def voc(local: str) -> str:
    return f"<{VOC}{local}>"


def inst(local: str) -> str:
    return f"<{INST}{local}>"


@dataclass
class Hierarchy:
    """The product-type hierarchy: classes, parent links, leaves, and the target type."""

    classes: list[str]
    parent: dict[str, str]
    leaves: list[str]
    target: str

    def ancestors(self, cls: str) -> list[str]:
        out = []
        while cls in self.parent:
            cls = self.parent[cls]
            out.append(cls)
        return out

    def schema_triples(self) -> list[tuple[str, str, str]]:
        return [(c, SUBCLASS, p) for c, p in self.parent.items()]

    def descendants(self, cls: str) -> set[str]:
        found = {c for c in self.classes if cls in self.ancestors(c)}
        return found


def hierarchy(size: str = "small") -> Hierarchy:
    """Build the hierarchy; children are spread evenly over the previous level."""
    levels = LEVELS[size]
    number = 0
    classes: list[str] = []
    parent: dict[str, str] = {}
    previous: list[str] = []
    for count in levels:
        current = []
        for i in range(count):
            number += 1
            cls = inst(f"ProductType{number}")
            current.append(cls)
            if previous:
                parent[cls] = previous[i * len(previous) // count]
        classes += current
        previous = current
    # The target: the first class two levels above the leaves (5 children x 7 leaves = 40).
    target_level = len(levels) - 3
    first_of_level = sum(levels[:target_level])
    target = classes[first_of_level]
    return Hierarchy(classes, parent, previous, target)


class Workload:
    """Offers, static data and patterns for one schema size and seed."""

    def __init__(self, size: str = "small", seed: int = 42) -> None:
        self.size = size
        self.seed = seed
        self.hierarchy = hierarchy(size)
        h = self.hierarchy
        anc = {leaf: h.ancestors(leaf) for leaf in h.leaves}
        self.target_leaves = [leaf for leaf in h.leaves if h.target in anc[leaf]]
        self.other_leaves = [leaf for leaf in h.leaves if h.target not in anc[leaf]]
        rng = random.Random(seed)
        leaf_rng = random.Random(seed + 3)  # apart, so that both schemas pick the same target products
        self.product_type: dict[str, str] = {}
        self.product_producer: dict[str, str] = {}
        self.products: list[str] = []
        for n in range(1, PRODUCTS + 1):
            producer = rng.randrange(1, PRODUCERS + 1)
            product = inst(f"dataFromProducer{producer}/Product{n}")
            pool = self.target_leaves if rng.random() < TARGET_SHARE else self.other_leaves
            self.product_type[product] = leaf_rng.choice(pool)
            self.product_producer[product] = inst(f"dataFromProducer{producer}/Producer{producer}")
            self.products.append(product)
        self.ancestors = {leaf: anc[leaf] for leaf in h.leaves}

    def schema(self) -> list[tuple[str, str, str]]:
        return self.hierarchy.schema_triples()

    def static(self, total: int = 10_000) -> list[tuple[str, str, str]]:
        """Vendor countries, product producers, producer countries: ``total`` triples."""
        rng = random.Random(self.seed + 1)
        country = voc("country")
        triples = [(p, voc("producer"), self.product_producer[p]) for p in self.products]
        producers = sorted(set(self.product_producer.values()))
        rest = total - len(triples)
        n_vendors = min(VENDORS, rest // 2)
        for v in range(1, n_vendors + 1):
            code = rng.choice(COUNTRY_CODES)
            triples.append((inst(f"dataFromVendor{v}/Vendor{v}"), country, f"<{COUNTRIES}{code}>"))
        extra = iter(range(PRODUCERS + 1, PRODUCERS * 10))
        while len(triples) < total:
            if producers:
                producer = producers.pop()
            else:
                n = next(extra)
                producer = inst(f"dataFromProducer{n}/Producer{n}")
            code = rng.choice(COUNTRY_CODES)
            triples.append((producer, country, f"<{COUNTRIES}{code}>"))
        return triples

    def offers(self, count: int, entailment: bool = True, start_ms: int = 1_000_000) -> Iterator[tuple[int, tuple[str, str, str]]]:
        """``(ts, triple)`` for ``count`` offers, one per ms, lazily."""
        rng = random.Random(self.seed + 2)
        products = self.products
        n_vendors = VENDORS
        xsd_int = f"<{XSD}integer>"
        xsd_dt = f"<{XSD}dateTime>"
        xsd_date = f"<{XSD}date>"
        xsd_dec = f"<{VOC}USD>"
        t_offer, p_product, p_vendor = voc("Offer"), voc("product"), voc("vendor")
        p_price, p_from, p_to = voc("price"), voc("validFrom"), voc("validTo")
        p_days, p_page = voc("deliveryDays"), voc("offerWebpage")
        p_pub, p_date = f"<{DC}publisher>", f"<{DC}date>"
        for i in range(count):
            ts = start_ms + i
            v = rng.randrange(1, n_vendors + 1)
            offer = inst(f"dataFromVendor{v}/Offer{i + 1}")
            vendor = inst(f"dataFromVendor{v}/Vendor{v}")
            product = products[rng.randrange(len(products))]
            day = 1 + i % 28
            yield ts, (offer, RDF_TYPE, t_offer)
            yield ts, (offer, p_product, product)
            yield ts, (offer, p_vendor, vendor)
            yield ts, (offer, p_price, f'"{rng.randrange(500, 100000) / 100:.2f}"^^{xsd_dec}')
            yield ts, (offer, p_from, f'"2008-06-{day:02d}T00:00:00"^^{xsd_dt}')
            yield ts, (offer, p_to, f'"2008-09-{day:02d}T00:00:00"^^{xsd_dt}')
            yield ts, (offer, p_days, f'"{rng.randrange(1, 8)}"^^{xsd_int}')
            yield ts, (offer, p_page, f"<http://www.vendor{v}.com/offers/{i + 1}>")
            yield ts, (offer, p_pub, vendor)
            yield ts, (offer, p_date, f'"2008-07-{day:02d}"^^{xsd_date}')
            leaf = self.product_type[product]
            yield ts, (product, RDF_TYPE, leaf)
            if not entailment:
                for cls in self.ancestors[leaf]:
                    yield ts, (product, RDF_TYPE, cls)

    def lines(self, count: int, entailment: bool = True) -> Iterator[str]:
        """Recorded-stream lines (``ms<TAB>s p o .``)."""
        for ts, (s, p, o) in self.offers(count, entailment):
            yield f"{ts}\t{s} {p} {o} .\n"

    def matching_offers(self, count: int, pattern: int = 1) -> set[str]:
        """The offers a correct engine must report (independent of windows: every offer's
        triples share one timestamp)."""
        static = self.static()
        gb = {s for s, p, o in static if p == voc("country") and o.endswith("#GB>")}
        de = {s for s, p, o in static if p == voc("country") and o.endswith("#DE>")}
        out = set()
        current: dict[str, str] = {}
        for _, (s, p, o) in self.offers(count, True):
            current[p] = o
            if p == RDF_TYPE and s in self.product_type:
                offer_product = current[voc("product")]
                vendor = current[voc("vendor")]
                offer = current_offer
                if self.hierarchy.target in self.ancestors[self.product_type[offer_product]]:
                    if pattern >= 2 and vendor not in gb:
                        continue
                    if pattern >= 3 and self.product_producer[offer_product] not in de:
                        continue
                    out.add(offer)
            elif p == RDF_TYPE:
                current_offer = s
        return out


def query_text(pattern: int, width_ms: int, name: str | None = None) -> str:
    """Listing 2's patterns in RSP-QL; static data (patterns 2, 3) outside the WINDOW."""
    name = name or f"bsbm-pattern{pattern}"
    seconds = width_ms / 1000
    width = f"PT{seconds:g}S"
    static = ""
    if pattern >= 2:
        static += f"  ?vendor bsbm-voc:country <{COUNTRIES}GB> .\n"
    if pattern >= 3:
        static += f"  ?product bsbm-voc:producer ?producer .\n  ?producer bsbm-voc:country <{COUNTRIES}DE> .\n"
    return f"""PREFIX bsbm-voc: <{VOC}>
PREFIX bsbm-inst: <{INST}>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX dc: <{DC}>
REGISTER RSTREAM <{name}> AS
SELECT ?offer ?product ?vendor ?price ?from ?to ?delivery ?webpage ?publisher ?date
FROM NAMED WINDOW <w> ON <{STREAM_IRI}> [RANGE {width} STEP PT1S]
WHERE {{
  WINDOW <w> {{
    ?offer rdf:type bsbm-voc:Offer .
    ?offer bsbm-voc:product ?product .
    ?offer bsbm-voc:vendor ?vendor .
    ?offer bsbm-voc:price ?price .
    ?offer bsbm-voc:validFrom ?from .
    ?offer bsbm-voc:validTo ?to .
    ?offer bsbm-voc:deliveryDays ?delivery .
    ?offer bsbm-voc:offerWebpage ?webpage .
    ?offer dc:publisher ?publisher .
    ?offer dc:date ?date .
    ?product rdf:type <{TARGET_PLACEHOLDER}> .
  }}
{static}}}
"""


TARGET_PLACEHOLDER = "TARGET"


def query_for(workload: Workload, pattern: int, width_ms: int, name: str | None = None) -> str:
    return query_text(pattern, width_ms, name).replace(f"<{TARGET_PLACEHOLDER}>", workload.hierarchy.target)


def write_schema_nt(path: str, workload: Workload) -> None:
    with open(path, "w") as fh:
        for s, p, o in workload.schema():
            fh.write(f"{s} {p} {o} .\n")


def write_static_nt(path: str, workload: Workload) -> None:
    with open(path, "w") as fh:
        for s, p, o in workload.static():
            fh.write(f"{s} {p} {o} .\n")

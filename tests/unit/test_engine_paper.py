"""The Sparkwave paper's own examples, run through the engine's public API."""
from __future__ import annotations

from edgewave.agent.engine import Engine, Query, TriplePattern, WindowSpec, parse_query

RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
SUBPROP = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
DOMAIN = "<http://www.w3.org/2000/01/rdf-schema#domain>"
RANGE = "<http://www.w3.org/2000/01/rdf-schema#range>"

# Listing 1(a): the stream; terms written as in the paper.
LISTING_1 = [
    ("<t11>", "<a>", "<b>", 10),
    ("<t21>", "<m>", "<n>", 20),
    ("<t12>", "<a>", "<b>", 40),
    ("<t11>", "<c>", "<t21>", 60),
    ("<t22>", "<m>", "<n>", 60),
    ("<t21>", "<l>", "<o>", 70),
    ("<t12>", "<c>", "<t22>", 80),
    ("<t22>", "<l>", "<o>", 90),
    ("<t31>", "<p>", "<q>", 120),
    ("<t32>", "<p>", "<q>", 170),
]


def listing_1_query(width: int) -> Query:
    w = WindowSpec("<w>", "<http://example.org/s>", width)
    return Query(
        "listing1",
        (),
        {"<w>": w},
        (
            TriplePattern("?x", "<a>", "<b>", "<w>"),
            TriplePattern("?x", "<c>", "?y", "<w>"),
            TriplePattern("?y", "<m>", "<n>", "<w>"),
        ),
    )


def run_listing_1(width: int) -> list:
    matches = []
    engine = Engine(on_match=matches.append)
    engine.add_query(listing_1_query(width))
    for s, p, o, ts in LISTING_1:
        engine.push((s, p, o), ts)
    return matches


def test_listing_1_gives_exactly_g1_and_g2_with_their_intervals():
    matches = run_listing_1(50)
    assert [(m.bindings, m.start, m.end) for m in matches] == [
        ({"x": "<t11>", "y": "<t21>"}, 10, 60),
        ({"x": "<t12>", "y": "<t22>"}, 40, 80),
    ]
    g1 = matches[0]
    assert sorted(g1.triples, key=lambda t: t[1]) == [
        (("<t11>", "<a>", "<b>"), 10),
        (("<t21>", "<m>", "<n>"), 20),
        (("<t11>", "<c>", "<t21>"), 60),
    ]
    assert g1.pattern == "listing1"


def test_listing_1_a_narrower_window_drops_g1():
    # G1 spans 50 ms, G2 40 ms: a 40 ms window keeps only G2.
    matches = run_listing_1(40)
    assert [(m.bindings["x"], m.start, m.end) for m in matches] == [("<t12>", 40, 80)]
    assert run_listing_1(39) == []


def test_listing_1_match_is_emitted_when_its_last_triple_arrives():
    seen: list[tuple[int, int]] = []
    engine = Engine(on_match=lambda m: seen.append((clock[0], m.end)))
    engine.add_query(listing_1_query(50))
    clock = [0]
    for s, p, o, ts in LISTING_1:
        clock[0] = ts
        engine.push((s, p, o), ts)
    assert seen == [(60, 60), (80, 80)]


# Figure 4: the social-media ontology, the query with static sioc:account_of triples.
TWD = "http://twitter.example.org/ns#"
FB = "http://facebook.example.org/ns#"
SMA = "http://socialmedia.example.org/ns#"
SIOC = "http://rdfs.org/sioc/ns#"
FOAF = "http://xmlns.com/foaf/0.1/"
GEO = "http://sws.geonames.org/"
TW_STREAM = "http://twitter.example.org/update/stream"
FB_STREAM = "http://facebook.example.org/update/stream"


def t(ns: str, local: str) -> str:
    return f"<{ns}{local}>"


FIGURE_4_SCHEMA = [
    # Classes: channel-specific posts under common ones (the full network has more nodes
    # than the reduced one needs).
    (t(TWD, "Tweet"), SUBCLASS, t(SMA, "Post")),
    (t(FB, "StatusUpdate"), SUBCLASS, t(SMA, "Post")),
    (t(SMA, "Post"), SUBCLASS, t(SIOC, "Post")),
    (t(TWD, "Account"), SUBCLASS, t(SIOC, "UserAccount")),
    (t(FB, "Account"), SUBCLASS, t(SIOC, "UserAccount")),
    (t(SMA, "Place"), SUBCLASS, t(SMA, "Topic")),
    # Properties: channel-specific ones under the integrating vocabulary.
    (t(TWD, "post"), SUBPROP, t(SIOC, "creator_of")),
    (t(FB, "update"), SUBPROP, t(SIOC, "creator_of")),
    (t(TWD, "talksAbout"), SUBPROP, t(SMA, "talksAbout")),
    (t(FB, "mentions"), SUBPROP, t(SMA, "talksAbout")),
    (t(TWD, "post"), DOMAIN, t(TWD, "Account")),
    (t(TWD, "post"), RANGE, t(TWD, "Tweet")),
    (t(FB, "update"), DOMAIN, t(FB, "Account")),
    (t(FB, "update"), RANGE, t(FB, "StatusUpdate")),
    (t(SMA, "talksAbout"), RANGE, t(SMA, "Place")),
    (t(SIOC, "creator_of"), RANGE, t(SIOC, "Post")),
]

FIGURE_4_QUERY = f"""
PREFIX twd: <{TWD}>
PREFIX sma: <{SMA}>
PREFIX sioc: <{SIOC}>
PREFIX fb: <{FB}>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
REGISTER RSTREAM <MultiplePlaceNotification> AS
SELECT ?tweet ?fbpost ?user
FROM NAMED WINDOW <tw> ON <{TW_STREAM}> [RANGE PT5M STEP PT1M]
FROM NAMED WINDOW <fw> ON <{FB_STREAM}> [RANGE PT5M STEP PT1M]
WHERE {{
  WINDOW <tw> {{
    ?tweet rdf:type twd:Tweet .
    ?tweet sma:talksAbout ?place .
    ?twitteraccount sioc:creator_of ?tweet .
  }}
  ?twitteraccount sioc:account_of ?user .
  WINDOW <fw> {{
    ?fbpost rdf:type fb:StatusUpdate .
    ?fbpost sma:talksAbout ?place .
    ?fbaccount sioc:creator_of ?fbpost .
  }}
  ?fbaccount sioc:account_of ?user .
}}
"""

FIGURE_4_STATIC = [
    (t(FB, "JohnDoe"), t(SIOC, "account_of"), t(FOAF, "JohnDoe")),
    (t(TWD, "johnd"), t(SIOC, "account_of"), t(FOAF, "JohnDoe")),
]

# Figure 4(c): none of these uses a term of the query: only entailment can match them.
FIGURE_4_FB = [
    (t(FB, "JohnDoe"), t(FB, "update"), t(FB, "post123")),
    (t(FB, "post123"), t(FB, "mentions"), t(GEO, "2775220")),
]
FIGURE_4_TW = [
    (t(TWD, "johnd"), t(TWD, "post"), t(TWD, "tweet456")),
    (t(TWD, "tweet456"), t(TWD, "talksAbout"), t(GEO, "2775220")),
]


def run_figure_4(entailment: bool = True, spacing_ms: int = 1000) -> tuple[Engine, list]:
    matches: list = []
    engine = Engine(schema=FIGURE_4_SCHEMA, entailment=entailment, on_match=matches.append)
    engine.add_query(parse_query(FIGURE_4_QUERY))
    engine.add_static(FIGURE_4_STATIC)
    ts = 1_000_000
    for triple in FIGURE_4_FB:
        engine.push(triple, ts, FB_STREAM)
        ts += spacing_ms
    for triple in FIGURE_4_TW:
        engine.push(triple, ts, f"<{TW_STREAM}>")  # either spelling of the stream IRI works
        ts += spacing_ms
    return engine, matches


def test_figure_4_matches_only_through_entailment():
    engine, matches = run_figure_4()
    assert len(matches) == 1
    m = matches[0]
    assert m.pattern == "MultiplePlaceNotification"
    assert m.bindings == {"tweet": t(TWD, "tweet456"), "fbpost": t(FB, "post123"), "user": t(FOAF, "JohnDoe")}
    assert (m.start, m.end) == (1_000_000, 1_003_000)
    # Figure 4(d): the inferred triples are what the match is made of, with the static ones (-1).
    made_of = {triple for triple, _ in m.triples}
    assert (t(TWD, "tweet456"), RDF_TYPE, t(TWD, "Tweet")) in made_of
    assert (t(TWD, "johnd"), t(SIOC, "creator_of"), t(TWD, "tweet456")) in made_of
    assert (t(FB, "post123"), t(SMA, "talksAbout"), t(GEO, "2775220")) in made_of
    assert {ts for triple, ts in m.triples if triple in FIGURE_4_STATIC} == {-1}
    assert engine.stats()["entailed"] >= 6


def test_figure_4_without_entailment_finds_nothing():
    _, matches = run_figure_4(entailment=False)
    assert matches == []


def test_figure_4_outside_the_five_minute_windows_finds_nothing():
    _, matches = run_figure_4(spacing_ms=2 * 60_000)  # 6 minutes from first to last
    assert matches == []


def test_figure_4_reduced_epsilon_network_has_the_two_pattern_classes():
    engine, _ = run_figure_4()
    eps = engine.epsilon
    assert set(eps.class_nodes) == {t(TWD, "Tweet"), t(FB, "StatusUpdate")}
    # Only properties whose entailments reach a pattern term remain: the sub-properties,
    # the ranges typing posts (sioc:creator_of's range sioc:Post is not a pattern class).
    assert set(eps.property_nodes) == {t(TWD, "post"), t(FB, "update"), t(TWD, "talksAbout"), t(FB, "mentions")}
    assert eps.property_nodes[t(TWD, "post")].so_links == (t(SIOC, "creator_of"),)
    assert eps.property_nodes[t(TWD, "post")].o_links == (t(TWD, "Tweet"),)

"""The RSP-QL parser: the query forms users write, canonical terms, and errors a user can act on."""
from __future__ import annotations

import pytest

from edgewave.agent.engine.query import QuerySyntaxError, TriplePattern, WindowSpec
from edgewave.agent.engine.rspql import parse_duration, parse_query
from edgewave.shared import ntriples

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
EX = "http://example.org/"


def ex(local: str) -> str:
    return f"<{EX}{local}>"


# ------------------------------------------------------------ the form of README.md's "Writing patterns"

FIRE = """\
PREFIX ex: <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
REGISTER RSTREAM <fire> AS
SELECT ?room ?temp ?smoke
FROM NAMED WINDOW ex:w ON ex:sensors [RANGE PT10S STEP PT1S]
WHERE {
  WINDOW ex:w {
    ?t a ex:TemperatureObservation ; ex:room ?room ; sosa:hasSimpleResult ?temp .
    ?s a ex:SmokeObservation ; ex:room ?room ; sosa:hasSimpleResult ?smoke .
    FILTER(?temp > 50 && ?smoke = true)
  }
  ?room ex:floor ?floor .
}
"""


def test_rsp4j_query_with_window_and_static_patterns():
    q = parse_query(FIRE)
    assert q.name == "fire"
    assert q.select == ("room", "temp", "smoke")
    assert q.windows == {ex("w"): WindowSpec(ex("w"), ex("sensors"), 10_000, 1_000)}
    assert len(q.patterns) == 7
    assert q.patterns[0] == TriplePattern("?t", RDF_TYPE, ex("TemperatureObservation"), ex("w"))
    assert q.patterns[2] == TriplePattern("?t", "<http://www.w3.org/ns/sosa/hasSimpleResult>", "?temp", ex("w"))
    assert all(tp.window == ex("w") for tp in q.patterns[:6])
    assert q.patterns[6] == TriplePattern("?room", ex("floor"), "?floor", None)  # static data
    assert q.variables() == ["t", "room", "temp", "s", "smoke", "floor"]
    (f,) = q.filters
    assert f.text == "(?temp > 50 && ?smoke = true)"
    assert f.variables == {"temp", "smoke"}
    assert q.text == FIRE
    assert q.prefixes["ex"] == EX
    assert not q.distinct


def test_a_term_written_two_ways_is_one_string():
    q1, q2 = parse_query(FIRE), parse_query(FIRE.replace("ex:room", "<http://example.org/room>"))
    assert q1.patterns[1].p == q2.patterns[1].p == "<http://example.org/room>"


def test_rspjs_on_stream_istream_and_prefixed_names():
    q = parse_query("""
        PREFIX : <http://example.org/>
        REGISTER ISTREAM :alerts AS
        SELECT * FROM NAMED WINDOW :w1 ON STREAM :s1 [RANGE PT1M30S STEP PT0.5S]
        WHERE { WINDOW :w1 { ?x :p ?y } }""")
    assert q.name == EX + "alerts"
    assert q.select == ()
    assert q.windows[ex("w1")] == WindowSpec(ex("w1"), ex("s1"), 90_000, 500)
    assert q.projection() == ["x", "y"]


@pytest.mark.parametrize("keyword", ["RSTREAM", "ISTREAM", "DSTREAM", "rstream", "QUERY"])
def test_register_forms(keyword):
    q = parse_query(f"REGISTER {keyword} <http://example.org/q> AS SELECT ?x FROM NAMED WINDOW <w> ON <s> "
                    "[RANGE PT5S STEP PT1S] WHERE { WINDOW <w> { ?x <p> ?o } }")
    assert q.name == "http://example.org/q"
    assert q.patterns == (TriplePattern("?x", "<p>", "?o", "<w>"),)


def test_several_windows_over_several_streams():
    q = parse_query("""
        PREFIX : <http://example.org/>
        REGISTER RSTREAM <both> AS
        SELECT ?room
        FROM NAMED WINDOW :short ON :temperature [RANGE PT5S STEP PT1S]
        FROM NAMED WINDOW :long ON :occupancy [RANGE PT10M STEP PT1M]
        WHERE {
          WINDOW :short { ?t :room ?room ; :value ?v . FILTER(?v > 30) }
          WINDOW :long { ?o :room ?room ; :people ?n }
          ?room :floor 3 .
        }""")
    assert q.windows[ex("short")] == WindowSpec(ex("short"), ex("temperature"), 5_000, 1_000)
    assert q.windows[ex("long")] == WindowSpec(ex("long"), ex("occupancy"), 600_000, 60_000)
    assert [tp.window for tp in q.patterns] == [ex("short")] * 2 + [ex("long")] * 2 + [None]
    assert q.patterns[-1].o == f'"3"^^<{XSD}integer>'


def test_select_distinct_is_recorded():
    q = parse_query("SELECT DISTINCT ?x FROM NAMED WINDOW <w> ON <s> [RANGE PT1S] WHERE { WINDOW <w> { ?x <p> ?y } }")
    assert q.distinct and q.select == ("x",) and q.name == "query"
    assert q.windows["<w>"].step_ms is None


# ----------------------------------------------------------------------------- Sparkwave (C-SPARQL style)

LISTING_2_PREFIX = """\
REGISTER QUERY BSBSOfferDetection AS
PREFIX bsbm-voc:<http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/vocabulary/>
PREFIX bsbm-inst:<http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/instances/>
PREFIX rdf:<http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX dc:<http://purl.org/dc/elements/1.1/>
SELECT ?offer ?product ?vendor ?price ?from ?to ?delivery ?webpage
?publisher ?date
FROM STREAM <http://bsbm.org/stream>{range}
FROM <http://members.sti2.at/~rdjank/ProductTypeHierarchy.rdf>
WHERE {{
?offer rdf:type bsbm-voc:Offer.
?offer bsbm-voc:product ?product.
?offer bsbm-voc:vendor ?vendor.
?offer bsbm-voc:price ?price.
?offer bsbm-voc:validFrom ?from.
?offer bsbm-voc:validTo ?to.
?offer bsbm-voc:deliveryDays ?delivery.
?offer bsbm-voc:offerWebpage ?webpage.
?offer dc:publisher ?publisher.
?offer dc:date ?date.
?product rdf:type bsbm-inst:TargetProductType{extra}
}}
"""
VOC = "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/vocabulary/"
STREAM = "<http://bsbm.org/stream>"


def test_sparkwave_listing_2_pattern_1_verbatim_with_the_width_given_outside():
    q = parse_query(LISTING_2_PREFIX.format(range="", extra=""), default_width_ms=5_000)
    assert q.name == "BSBSOfferDetection"
    assert len(q.select) == 10 and q.select[-1] == "date"
    assert q.windows == {STREAM: WindowSpec(STREAM, STREAM, 5_000, None, with_static=True)}
    assert len(q.patterns) == 11
    assert all(tp.window == STREAM for tp in q.patterns)
    assert q.patterns[-1] == TriplePattern(
        "?product", RDF_TYPE, "<http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/instances/TargetProductType>", STREAM)


def test_sparkwave_listing_2_without_a_width_says_how_to_give_one():
    with pytest.raises(QuerySyntaxError) as err:
        parse_query(LISTING_2_PREFIX.format(range="", extra=""))
    assert (err.value.line, err.value.column) == (8, 13)
    assert "[RANGE <duration>]" in str(err.value)


@pytest.mark.parametrize("extra,added", [
    (".\n?vendor bsbm-voc:country <http://downloade.org/rdf/iso-3166/countries#GB>", 1),
    (".\n?vendor bsbm-voc:country <http://downloade.org/rdf/iso-3166/countries#GB> .\n"
     "?product bsbm-voc:producer ?producer .\n"
     "?producer bsbm-voc:country <http://downloade.org/rdf/iso-3166/countries#DE>", 3),
])
def test_sparkwave_listing_2_patterns_2_and_3(extra, added):
    q = parse_query(LISTING_2_PREFIX.format(range=" [RANGE 1s]", extra=extra))
    assert q.windows[STREAM].width_ms == 1_000
    assert len(q.patterns) == 11 + added
    assert q.patterns[11] == TriplePattern(
        "?vendor", f"<{VOC}country>", "<http://downloade.org/rdf/iso-3166/countries#GB>", STREAM)


FIGURE_4 = """\
REGISTER QUERY MultiplePlaceNotification AS
PREFIX twd: <http://twitter.example.org/ns#>.
PREFIX sma: <http://socialmedia.example.org/ns#>.
PREFIX sioc: <http://rdfs.org/sioc/ns#>.
PREFIX fb: <http://facebook.example.org/ns#>.
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>.
SELECT ?tweet ?fbpost ?user
FROM STREAM <http://facebook.example.org/update/stream>
[RANGE 5m]
FROM STREAM <http://twitter.example.org/update/stream>
[RANGE 5m]
FROM <http://foaf.example.org/friends.rdf>
WHERE {
  ?tweet rdf:type twd:Tweet.
  ?tweet sma:talksAbout ?place.
  ?twitteraccount sioc:creator_of ?tweet.
  ?twitteraccount sioc:account_of ?user.
  ?fbpost rdf:type fb:StatusUpdate.
  ?fbpost sma:talksAbout ?place.
  ?fbaccount sioc:creator_of ?fbpost.
  ?fbaccount sioc:account_of ?user.
}
"""


def test_sparkwave_figure_4_two_streams_make_one_window_reading_both():
    q = parse_query(FIGURE_4)
    fb, tw = "<http://facebook.example.org/update/stream>", "<http://twitter.example.org/update/stream>"
    assert q.name == "MultiplePlaceNotification"
    assert q.windows == {fb: WindowSpec(fb, fb, 300_000, None, more_streams=(tw,), with_static=True)}
    assert q.windows[fb].streams() == (fb, tw)
    assert len(q.patterns) == 8 and all(tp.window == fb for tp in q.patterns)
    assert q.patterns[3] == TriplePattern("?twitteraccount", "<http://rdfs.org/sioc/ns#account_of>", "?user", fb)


def test_csparql_streams_with_different_ranges_take_the_widest_and_finest_step():
    q = parse_query("SELECT * FROM STREAM <a> [RANGE 10s STEP 2s] FROM STREAM <b> [RANGE 1m TUMBLING] "
                    "WHERE { ?x <p> ?y }")
    assert q.windows["<a>"] == WindowSpec("<a>", "<a>", 60_000, 2_000, more_streams=("<b>",), with_static=True)


# ----------------------------------------------------------------------------- RSP-QL* (quoted triples)

RSPQL_STAR_1_1 = """\
PREFIX : <http://example.org/>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
REGISTER RSTREAM :out AS
SELECT ?hr ?time
FROM NAMED WINDOW :w ON :heartRate [RANGE PT1M STEP PT10S]
WHERE {
  WINDOW :w {
    << ?obs sosa:hasSimpleResult ?hr >> :confidence ?c .
    ?obs sosa:resultTime ?time .
  }
  FILTER(?c > 0.9)
}
"""


def test_rspql_star_listing_1_1_confidence_annotation():
    q = parse_query(RSPQL_STAR_1_1)
    inner = TriplePattern("?obs", "<http://www.w3.org/ns/sosa/hasSimpleResult>", "?hr", None)
    assert q.patterns[0] == TriplePattern(inner, ex("confidence"), "?c", ex("w"))
    assert q.windows[ex("w")] == WindowSpec(ex("w"), ex("heartRate"), 60_000, 10_000)
    assert q.variables() == ["obs", "hr", "c", "time"]
    assert q.filters[0].variables == {"c"}
    keep = q.filters[0].bind({"c": 0})
    assert keep([f'"0.95"^^<{XSD}decimal>']) and not keep([f'"0.5"^^<{XSD}decimal>'])


RSPQL_STAR_1_2 = """\
PREFIX : <http://example.org/ecare#>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
REGISTER RSTREAM :lowEmergency AS
SELECT ?activity ?hr ?br ?ox
FROM NAMED WINDOW :hrw ON :heartRate [RANGE PT1M STEP PT10S]
FROM NAMED WINDOW :brw ON :breathingRate [RANGE PT1M STEP PT10S]
FROM NAMED WINDOW :oxw ON :oxygen [RANGE PT1M STEP PT10S]
FROM NAMED WINDOW :locw ON :location [RANGE PT10M STEP PT10S]
FROM NAMED WINDOW :actw ON :activity [RANGE PT5M STEP PT10S]
WHERE {
  WINDOW :hrw { << ?o1 sosa:hasSimpleResult ?hr >> :confidence ?c1 . FILTER(?c1 >= 0.8) }
  WINDOW :brw { << ?o2 sosa:hasSimpleResult ?br >> :confidence ?c2 . FILTER(?c2 >= 0.8) }
  WINDOW :oxw { << ?o3 sosa:hasSimpleResult ?ox >> :confidence ?c3 . FILTER(?c3 >= 0.8) }
  WINDOW :locw { :rut :locatedIn :livingRoom . :partner :locatedIn ?elsewhere . FILTER(?elsewhere != :home) }
  WINDOW :actw { << :rut :performs ?activity >> :confidence ?c5 . }
  ?activity :maxHeartRate ?maxHr ; :minBreathingRate ?minBr .
  FILTER(?hr > ?maxHr && ?br < ?minBr)
}
"""


def test_rspql_star_listing_1_2_five_streams_and_thresholds_from_background_data():
    q = parse_query(RSPQL_STAR_1_2)
    assert len(q.windows) == 5 and q.windows["<http://example.org/ecare#locw>"].width_ms == 600_000
    assert len(q.filters) == 5
    constant = q.patterns[3]
    assert constant.s == "<http://example.org/ecare#rut>" and constant.window == "<http://example.org/ecare#locw>"
    activity = q.patterns[5]
    assert activity.s == TriplePattern("<http://example.org/ecare#rut>", "<http://example.org/ecare#performs>",
                                       "?activity", None)
    assert [tp.window for tp in q.patterns[6:]] == [None, None]
    assert q.filters[-1].variables == {"hr", "maxHr", "br", "minBr"}


def test_nested_quoted_triple_patterns_and_constant_quoted_terms():
    q = parse_query("""PREFIX : <http://example.org/>
        SELECT * FROM NAMED WINDOW :w ON :s [RANGE PT1S] WHERE { WINDOW :w {
          << << ?a :p ?b >> :says :x >> :confidence ?c .
          ?who :believes << :a :p "b"@EN >> .
          << :a :p :b >> :source ?src .
        } }""")
    nested = q.patterns[0].s
    assert nested.s == TriplePattern("?a", ex("p"), "?b", None) and nested.o == ex("x")
    assert q.patterns[1].o == f'<< {ex("a")} {ex("p")} "b"@en >>'  # a constant quoted triple is a term
    assert q.patterns[2].s == f'<< {ex("a")} {ex("p")} {ex("b")} >>'
    assert q.variables() == ["a", "b", "c", "who", "src"]


def test_sparql_star_annotation_syntax():
    q = parse_query("""PREFIX : <http://example.org/>
        SELECT * FROM NAMED WINDOW :w ON :s [RANGE PT1S] WHERE { WINDOW :w {
          ?obs :value ?v {| :confidence ?c ; :source :s1 |} , 7 .
          :a :p :b {| :confidence 0.5 |} } }""")
    inner = TriplePattern("?obs", ex("value"), "?v", None)
    assert q.patterns == (
        TriplePattern("?obs", ex("value"), "?v", ex("w")),
        TriplePattern(inner, ex("confidence"), "?c", ex("w")),
        TriplePattern(inner, ex("source"), ex("s1"), ex("w")),
        TriplePattern("?obs", ex("value"), f'"7"^^<{XSD}integer>', ex("w")),
        TriplePattern(ex("a"), ex("p"), ex("b"), ex("w")),
        TriplePattern(f'<< {ex("a")} {ex("p")} {ex("b")} >>', ex("confidence"), f'"0.5"^^<{XSD}decimal>', ex("w")),
    )
    with pytest.raises(QuerySyntaxError) as err:
        parse_query("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?a <p> ?b {| <c> ?c } }")
    assert str(err.value) == "line 1, column 65: expected '|}' or ';', found '}'"


# ----------------------------------------------------------------------------- terms

def _objects(body: str) -> list[str]:
    q = parse_query("PREFIX ex: <http://example.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
                    "SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1S] WHERE { WINDOW <w> { ?x ex:p " + body + " } }")
    return [tp.o for tp in q.patterns]


def test_literals_become_canonical_n_triples_terms():
    assert _objects('12, -5, +7, 1.50, .5, 1e3, -2.5E-3, true, false') == [
        f'"12"^^<{XSD}integer>', f'"-5"^^<{XSD}integer>', f'"+7"^^<{XSD}integer>', f'"1.50"^^<{XSD}decimal>',
        f'".5"^^<{XSD}decimal>', f'"1e3"^^<{XSD}double>', f'"-2.5E-3"^^<{XSD}double>',
        f'"true"^^<{XSD}boolean>', f'"false"^^<{XSD}boolean>']
    assert _objects(r'''"a\"b", 'it\'s', "tab\there", "\u00e9\U0001F600", "line\nbreak"''') == [
        r'"a\"b"', '"it\'s"', '"tab\there"', '"é😀"', r'"line\nbreak"']
    assert _objects('"""multi\n"line" text""", \'\'\'x\'\'\'') == [r'"multi\n\"line\" text"', '"x"']
    assert _objects('"chat"@fr-BE, "25.3"^^xsd:decimal, "x"^^xsd:string, "y"^^<http://ex.org/dt>') == [
        '"chat"@fr-be', f'"25.3"^^<{XSD}decimal>', '"x"', '"y"^^<http://ex.org/dt>']


def test_terms_are_exactly_what_the_n_triples_codec_produces():
    objects = _objects(r'''"a\"b\\c\u00e9", "chat"@EN-gb, "2024-01-01T00:00:00Z"^^xsd:dateTime,
                           <http://example.org/caf\u00e9>''')
    line = (r'<http://example.org/x> <http://example.org/p> "a\"b\\c\u00e9" .' + "\n"
            r'<http://example.org/x> <http://example.org/p> "chat"@EN-gb .' + "\n"
            '<http://example.org/x> <http://example.org/p> '
            f'"2024-01-01T00:00:00Z"^^<{XSD}dateTime> .\n'
            r'<http://example.org/x> <http://example.org/p> <http://example.org/caf\u00e9> .')
    assert objects == [t[2] for t in ntriples.parse(line)]


def test_prefixed_names_escapes_base_and_a():
    q = parse_query(r"""BASE <http://example.org/base/>
        PREFIX : <http://example.org/>
        PREFIX rel: <ns/>
        SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1S]
        WHERE { WINDOW <w> { ?x a :Class ; :a\.b\-c rel:x ; $y <relative> . :p%20q :x.y ?z } }""")
    assert q.windows["<http://example.org/base/w>"].stream == "<http://example.org/base/s>"
    pats = q.patterns
    assert pats[0].p == RDF_TYPE and pats[0].o == ex("Class")
    assert pats[1].p == ex("a.b-c") and pats[1].o == "<http://example.org/base/ns/x>"
    assert pats[2].p == "?y" and pats[2].o == "<http://example.org/base/relative>"
    assert pats[3].s == ex("p%20q") and pats[3].p == ex("x.y")


def test_an_empty_fragment_survives_base_resolution():
    """RFC 3986 keeps it; Python's urljoin drops it (W3C test basic/base-prefix-2)."""
    q = parse_query("BASE <http://example.org/x/> PREFIX : <#> PREFIX q: <?> SELECT * WHERE { :x q:p ?v }")
    assert q.patterns[0].s == "<http://example.org/x/#x>" and q.patterns[0].p == "<http://example.org/x/?p>"


def test_a_filter_in_a_nested_group_sees_only_that_groups_variables():
    """SPARQL scope (W3C algebra/filter-nested-2): the inner ?v is unbound, so BOUND is false."""
    from edgewave.agent.engine import Engine

    def matches(where: str) -> int:
        found: list = []
        engine = Engine(entailment=False, on_match=found.append)
        engine.add_query(parse_query(f"PREFIX : <http://example.org/> SELECT ?v WHERE {where}"))
        engine.add_static([(ex("x"), ex("p"), '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'),
                           (ex("x"), ex("q"), ex("y"))])
        return len(found)

    assert matches("{ :x :p ?v . FILTER(?v = 1) }") == 1
    assert matches("{ :x :p ?v . { FILTER(?v = 1) } }") == 0
    assert matches("{ :x :p ?v . { FILTER(!BOUND(?v)) } }") == 1
    assert matches("{ :x :p ?v . { :x :q ?y . FILTER(?v = 1) } }") == 0
    assert matches("{ { :x :p ?v . :x :q ?y . FILTER(?v = 1) } }") == 1
    assert matches("{ :x :q ?y . { :x :p ?v . { FILTER(?v = 1) } } }") == 0


def test_blank_nodes_are_non_distinguished_variables():
    q = parse_query("""PREFIX : <http://example.org/>
        SELECT * FROM NAMED WINDOW :w ON :s [RANGE PT1S]
        WHERE { WINDOW :w { _:obs :room ?room ; :value ?v . [] :near ?room .
                            ?room :has [ :kind :Sensor ; :id ?id ] } }""")
    assert len(q.patterns) == 6
    subjects = [tp.s for tp in q.patterns]
    assert subjects[:3] == ["?_:obs", "?_:obs", "?_:anon1"]
    assert TriplePattern("?room", ex("has"), "?_:anon2", ex("w")) in q.patterns
    assert TriplePattern("?_:anon2", ex("kind"), ex("Sensor"), ex("w")) in q.patterns
    assert TriplePattern("?_:anon2", ex("id"), "?id", ex("w")) in q.patterns
    assert q.projection() == ["room", "v", "id"]


def test_predicate_object_lists_with_trailing_semicolons():
    q = parse_query("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> 1, 2 ; <q> ?y ;; ; . }")
    assert [(tp.p, tp.o) for tp in q.patterns] == [
        ("<p>", f'"1"^^<{XSD}integer>'), ("<p>", f'"2"^^<{XSD}integer>'), ("<q>", "?y")]


def test_comments_and_case_insensitive_keywords():
    q = parse_query("# a fire pattern\nregister rstream <f> as select ?x # the room\n"
                    "from named window <w> on stream <s> [range pt10s step pt1s]\n"
                    "where { window <w> { ?x <p> ?y filter(?y > 1) } }")
    assert q.windows["<w>"].width_ms == 10_000 and len(q.filters) == 1


@pytest.mark.parametrize("text,ms", [
    ("PT10S", 10_000), ("PT1M30S", 90_000), ("PT0.5S", 500), ("P1D", 86_400_000), ("PT2H", 7_200_000),
    ("P1DT1H", 90_000_000), ("P1W", 604_800_000), ("pt1s", 1_000), ("10s", 10_000), ("5m", 300_000),
    ("1h", 3_600_000), ("100ms", 100), ("2d", 172_800_000), ("1.5s", 1_500),
])
def test_durations(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["P1M", "P1Y", "PT", "P", "10x", "PT0S", "0s", "PT10", "10"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


# ----------------------------------------------------------------------------- errors

def _error(text: str, **options) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as err:
        parse_query(text, **options)
    return err.value


def test_misspelled_filter_names_position_and_expectation():
    e = _error("PREFIX : <http://example.org/>\n"
               "SELECT * FROM NAMED WINDOW :w ON :s [RANGE PT1S]\n"
               "WHERE { WINDOW :w { ?x :p ?y . FILTR(?y > 2) } }")
    assert str(e) == "line 3, column 32: expected '}' or a triple pattern, found 'FILTR'"
    assert (e.line, e.column, e.expected) == (3, 32, ("'}' or a triple pattern",))


def test_missing_dot_between_triple_patterns():
    e = _error("SELECT * FROM STREAM <s> [RANGE 1s]\nWHERE {\n  ?x <p> ?y\n  ?y <q> ?z\n}")
    assert str(e) == "line 4, column 3: expected '.', ';', ',' or '}', found '?y'"


def test_undeclared_window():
    e = _error("PREFIX : <http://example.org/>\nSELECT * FROM NAMED WINDOW :w ON :s [RANGE PT1S]\n"
               "WHERE {\n  WINDOW :w2 { ?x :p ?y }\n}")
    assert (e.line, e.column) == (4, 10)
    assert "window <http://example.org/w2> is not declared" in str(e) and "<http://example.org/w>" in str(e)


def test_undeclared_prefix():
    e = _error("PREFIX ex: <http://example.org/>\nSELECT * FROM STREAM <s> [RANGE 1s]\nWHERE { ?x exx:p ?y }")
    assert str(e) == "line 3, column 12: undeclared prefix 'exx:'"


def test_select_variable_not_in_pattern():
    e = _error("SELECT ?x ?nope\nFROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y }")
    assert (e.line, e.column) == (1, 11)
    assert "?nope does not occur" in str(e)


def test_missing_window_range_and_bad_duration():
    e = _error("SELECT * FROM NAMED WINDOW <w> ON <s> WHERE { WINDOW <w> { ?x <p> ?y } }")
    assert (e.line, e.column) == (1, 39) and "expected '[RANGE" in str(e)
    e = _error("SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE P1M] WHERE { WINDOW <w> { ?x <p> ?y } }")
    assert (e.line, e.column) == (1, 46) and "calendar durations" in str(e)
    e = _error("SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1S STEP] WHERE { WINDOW <w> { ?x <p> ?y } }")
    assert (e.line, e.column) == (1, 55) and "expected a duration" in str(e)


def test_unclosed_group_and_trailing_garbage():
    e = _error("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y .\n")
    assert str(e) == "line 2, column 1: expected '}' or a triple pattern, found end of query"
    e = _error("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y } LIMIT 5")
    assert str(e) == ("line 1, column 57: LIMIT is not supported: a pattern's matches are reported as they "
                      "complete, with no solution modifiers")
    e = _error("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y } ?z")
    assert str(e) == "line 1, column 57: expected end of query, found '?z'"


def test_bad_filter_expressions():
    base = "SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y .\nFILTER({}) }"
    e = _error(base.replace("{}", "?y >"))
    assert str(e) == "line 2, column 12: expected an expression, found ')'"
    assert len(parse_query(base.replace("{}", "?y > 1")).filters) == 1
    e = _error(base.replace("{}", "REGEX(?y)"))
    assert (e.line, e.column) == (2, 8) and "REGEX takes 2 to 3 argument(s), got 1" in str(e)
    e = _error(base.replace("{}", 'REGEX(?y, "(")'))
    assert "invalid regular expression" in str(e)
    e = _error(base.replace("{}", "FOO(?y)"))
    assert str(e) == "line 2, column 8: unknown function or keyword 'FOO'"
    e = _error(base.replace("{}", "<http://ex.org/f>(?y)"))
    assert "unknown function <http://ex.org/f>" in str(e)
    e = _error(base.replace("{}", "(?y > 1"))
    assert "expected ')' or an operator" in str(e)


@pytest.mark.parametrize("text,line,column,message", [
    ("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y . OPTIONAL { ?x <q> ?z } }", 1, 57,
     "OPTIONAL is not supported"),
    ("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y UNION { ?x <q> ?z } }", 1, 55,
     "UNION is not supported"),  # no '.' before it
    ("SELECT ?x (?y + 1 AS ?z) FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y }", 1, 11, "expressions in SELECT"),
    ("PREFIX : <http://ex.org/>\nASK { ?x :p ?y }", 2, 1, "ASK queries are not supported"),
    ("SELECT * WHERE { ?x <p> ?y FILTER NOT EXISTS { ?x <q> ?z } }", 1, 35, "NOT EXISTS are not supported"),
    ("SELECT * WHERE { ?x <p> ?y } ORDER BY ?x LIMIT 5", 1, 30, "ORDER BY is not supported"),
    ("SELECT * WHERE { ?x <p>/<q> ?y }", 1, 24, "property paths are not supported"),
    ("SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE TRIPLES 10] WHERE { WINDOW <w> { ?x <p> ?y } }", 1, 46,
     "count-based windows"),
    ("SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1S] WHERE { WINDOW ?w { ?x <p> ?y } }", 1, 67,
     "WINDOW with a variable is not supported"),
    ("SELECT * WHERE { ?x <p> ?y { SELECT ?y WHERE { ?y <q> ?z } } }", 1, 30, "subqueries are not supported"),
    ("SELECT * WHERE { ?x <p>|<q> ?y }", 1, 24, "property paths are not supported"),
    ("SELECT * WHERE { ?x ^<p> ?y }", 1, 21, "property paths are not supported"),
    ("SELECT * WHERE { ( ?x ) <p> ?y }", 1, 18, "RDF collections are not supported"),
    ("SELECT * WHERE { ?x <p> ?y FILTER(?y && NOT EXISTS { ?y <q> 1 }) }", 1, 41, "NOT EXISTS are not supported"),
    ("PREFIX f: <http://ex.org/fn#>\nSELECT * WHERE { ?x <p> ?y FILTER(f:near(?y, 1)) }", 2, 35,
     "unknown function <http://ex.org/fn#near>"),
    # invalid SPARQL, after the W3C's negative syntax tests (syntax-sparql3 and 4, syntax-query)
    ("SELECT * WHERE { . ?x <p> ?y }", 1, 18, "expected '}' or a triple pattern, found '.'"),
    ("SELECT * WHERE { ?x <p> ?y . . ?x <q> ?z }", 1, 30, "expected '}' or a triple pattern, found '.'"),
    ("SELECT * WHERE { _:a <p> ?y . { _:a <q> 1 } }", 1, 33, "blank node _:a is used in two groups"),
    ("SELECT * WHERE { ?x <p> '\\uD800' }", 1, 25, "lone surrogate"),
    ("SELECT * WHERE { ?x <p\\U00110000> 1 }", 1, 21, "beyond the last Unicode code point"),
])
def test_unsupported_constructs_and_invalid_sparql_say_where_and_why(text, line, column, message):
    e = _error(text)
    assert (e.line, e.column) == (line, column) and message in str(e), str(e)


def test_valid_sparql_the_parser_used_to_misread():
    """From the W3C's positive syntax tests: a trailing ';' before FILTER or a group, a
    surrogate pair written as two escapes (as Java tools do)."""
    q = parse_query("SELECT * WHERE { ?x <p> ?y ; FILTER(?y > 1) ?x <q> ?z ; { ?x <r> 1 ; } }")
    assert [p.p for p in q.patterns] == ["<p>", "<q>", "<r>"] and len(q.filters) == 1
    assert parse_query("SELECT * WHERE { ?x <p> '\\uD83D\\uDE00' }").patterns[0].o == '"\U0001F600"'
    assert len(parse_query("SELECT * WHERE { _:a <p> ?y . _:a <q> 1 . FILTER(?y > 0) _:a <r> 2 }").patterns) == 3


def test_a_signed_number_after_a_predicate_is_a_literal_not_a_path():
    assert parse_query("SELECT * WHERE { ?x <p> +5 }").patterns[0].o == '"+5"^^<http://www.w3.org/2001/XMLSchema#integer>'


def test_unterminated_string_and_stray_characters():
    e = _error('SELECT * FROM STREAM <s> [RANGE 1s] WHERE {\n ?x <p> "abc }')
    assert (e.line, e.column) == (2, 9) and "unterminated" in str(e)
    e = _error("SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y ~ }")
    assert (e.line, e.column) == (1, 55) and "unexpected character '~'" in str(e)


def test_missing_register_name_and_empty_where():
    e = _error("REGISTER RSTREAM AS SELECT * WHERE { ?x <p> ?y }")
    assert (e.line, e.column) == (1, 18)
    e = _error("REGISTER RSTREAM <q> AS SELECT * FROM STREAM <s> [RANGE 1s] WHERE { }")
    assert "no triple patterns" in str(e)
    e = _error("REGISTER RSTREAM <q> SELECT * FROM STREAM <s> [RANGE 1s] WHERE { ?x <p> ?y }")
    assert str(e) == "line 1, column 22: expected AS, found 'SELECT'"


def test_literal_subject_is_rejected():
    e = _error('SELECT * FROM STREAM <s> [RANGE 1s] WHERE { "x" <p> ?y }')
    assert str(e) == "line 1, column 45: expected '}' or a triple pattern, found '\"x\"'"


# ----------------------------------------------------------------------------- scale

def test_a_thousand_patterns_compile():
    body = " .\n".join(f"?o{i} <http://example.org/p{i % 17}> ?o{i + 1}" for i in range(1000))
    q = parse_query(f"SELECT * FROM STREAM <s> [RANGE 1s] WHERE {{ {body} . FILTER(?o0 != ?o1000) }}")
    assert len(q.patterns) == 1000 and len(q.variables()) == 1001


# ----------------------------------------------------------------------------- robustness

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SEEDS = [FIRE, FIGURE_4, RSPQL_STAR_1_1, RSPQL_STAR_1_2, LISTING_2_PREFIX.format(range=" [RANGE 1s]", extra="")]


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(_SEEDS),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3),
                          st.sampled_from(list("{}<>?.;,()[]\"'#:^@ aWF0\n"))),
                max_size=4))
def test_any_damaged_query_parses_or_raises_a_located_syntax_error(seed, edits):
    text = seed
    for position, length, char in edits:
        position %= len(text) + 1
        text = text[:position] + char + text[position + length:]
    try:
        parse_query(text)
    except QuerySyntaxError as e:
        assert 1 <= e.line <= text.count("\n") + 1 and e.column >= 1
        assert str(e).startswith(f"line {e.line}, column {e.column}: ")

"""Per-instance evaluation through its entry points (``InstanceEvaluator``, ``edgewave match``):
what an operator sees as windows slide, checked against results worked out by hand."""
from __future__ import annotations

import json

import pytest

from edgewave.agent import match_cli
from edgewave.agent.engine.per_instance import InstanceEvaluator, InstanceQuery, parse_for_evaluation
from edgewave.agent.engine.query import Query, QuerySyntaxError

EX = "http://ex/"
INT = "<http://www.w3.org/2001/XMLSchema#integer>"


def iri(name: str) -> str:
    return f"<{EX}{name}>"


def num(n: int) -> str:
    return f'"{n}"^^{INT}'


def query(select: str, where: str, *, register: str = "RSTREAM", window: str = "[RANGE PT10S STEP PT5S]",
          tail: str = "") -> str:
    return (f"PREFIX : <{EX}>\nREGISTER {register} <q> AS\nSELECT {select}\n"
            f"FROM NAMED WINDOW :w ON :s {window}\nWHERE {{ {where} }} {tail}")


def reading(ev: InstanceEvaluator, ts: int, sensor: str, room: str, value: int) -> list:
    obs = iri(f"obs{ts}{sensor}")
    return ev.push((obs, iri("sensor"), iri(sensor)), ts) + ev.push((obs, iri("room"), iri(room)), ts) + \
        ev.push((obs, iri("value"), num(value)), ts)


def rows(results: list) -> list[tuple[int, int, list]]:
    return [(r.start, r.end, r.rows) for r in results]


def test_min_follows_the_window_when_the_minimum_expires() -> None:
    ev = InstanceEvaluator(query("(MIN(?v) AS ?min) (COUNT(*) AS ?n)", "WINDOW :w { ?o :value ?v }"))
    out = []
    for ts, value in [(0, 5), (4000, 9), (6000, 7), (11000, 8)]:
        out += reading(ev, ts, "a", "r1", value)
    out += ev.finish()
    assert rows(out) == [(0, 10000, [{"min": num(5), "n": num(3)}]),
                         (5000, 15000, [{"min": num(7), "n": num(2)}]),
                         (10000, 20000, [{"min": num(8), "n": num(1)}])]


def test_optional_retracts_and_reasserts_as_the_window_slides() -> None:
    ev = InstanceEvaluator(query("?o ?room", "WINDOW :w { ?o :sensor :a OPTIONAL { ?o :room ?room } }",
                                 window="[RANGE PT5S STEP PT5S]"))
    out = ev.push((iri("o1"), iri("sensor"), iri("a")), 1000)
    out += ev.push((iri("o1"), iri("room"), iri("r1")), 2000)
    out += ev.push((iri("o1"), iri("sensor"), iri("a")), 6000)  # the room stays behind in [0, 5 s)
    out += ev.finish()
    assert rows(out) == [(0, 5000, [{"o": iri("o1"), "room": iri("r1")}]), (5000, 10000, [{"o": iri("o1")}])]


def test_not_exists_and_minus_over_a_window_and_static_data() -> None:
    text = query("?room", "?room a :Room . FILTER NOT EXISTS { WINDOW :w { ?o :room ?room } }",
                 window="[RANGE PT5S STEP PT5S]")
    ev = InstanceEvaluator(text)
    ev.add_static([(iri("r1"), "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", iri("Room")),
                   (iri("r2"), "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", iri("Room"))])
    out = reading(ev, 1000, "a", "r1", 20) + reading(ev, 6000, "a", "r2", 20) + ev.finish()
    assert rows(out) == [(0, 5000, [{"room": iri("r2")}]), (5000, 10000, [{"room": iri("r1")}])]
    minus = InstanceEvaluator(query("?o", "WINDOW :w { ?o :sensor ?s MINUS { ?o :room :r1 } }",
                                    window="[RANGE PT5S STEP PT5S]"))
    out = reading(minus, 1000, "a", "r1", 1) + reading(minus, 2000, "b", "r2", 1) + minus.finish()
    assert rows(out) == [(0, 5000, [{"o": iri("obs2000b")}])]


def test_istream_and_dstream_report_what_changed() -> None:
    def run(register: str) -> list:
        ev = InstanceEvaluator(query("DISTINCT ?room", "WINDOW :w { ?o :room ?room }", register=register,
                                     window="[RANGE PT5S STEP PT5S]"))
        out = reading(ev, 0, "a", "r1", 1) + reading(ev, 5000, "a", "r1", 1) + reading(ev, 5000, "b", "r2", 1)
        out += reading(ev, 10000, "b", "r2", 1)
        return rows(out + ev.finish())
    assert run("ISTREAM") == [(0, 5000, [{"room": iri("r1")}]), (5000, 10000, [{"room": iri("r2")}]),
                              (10000, 15000, [])]
    assert run("DSTREAM") == [(0, 5000, []), (5000, 10000, []), (10000, 15000, [{"room": iri("r1")}])]


def test_report_policies_and_late_triples() -> None:
    text = query("(COUNT(*) AS ?n)", "WINDOW :w { ?o :value ?v }", window="[RANGE PT1S STEP PT1S]")
    non_empty = InstanceEvaluator(text)
    out = reading(non_empty, 0, "a", "r", 1) + reading(non_empty, 3500, "a", "r", 1)
    late = reading(non_empty, 200, "a", "r", 1)  # older than the end of the closed [0, 1 s)
    assert non_empty.late_triples == 3 and not late
    assert rows(out + non_empty.finish()) == [(0, 1000, [{"n": num(1)}]), (3000, 4000, [{"n": num(1)}])]
    every = InstanceEvaluator(text, report="window-close")
    out = reading(every, 0, "a", "r", 1) + reading(every, 2500, "a", "r", 1) + every.finish()
    assert rows(out) == [(0, 1000, [{"n": num(1)}]), (1000, 2000, [{"n": num(0)}]), (2000, 3000, [{"n": num(1)}])]
    waiting = InstanceEvaluator(text, lateness_ms=500)
    out = reading(waiting, 900, "a", "r", 1) + reading(waiting, 1200, "a", "r", 1) + reading(waiting, 950, "b", "r", 1)
    assert waiting.late_triples == 0 and rows(out) == []
    assert rows(waiting.advance(1500)) == [(0, 1000, [{"n": num(2)}])]


def test_rdfs_entailment_and_two_windows() -> None:
    schema = [(iri("Thermometer"), "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", iri("Sensor"))]
    text = (f"PREFIX : <{EX}>\nSELECT (COUNT(DISTINCT ?s) AS ?sensors) (SUM(?v) AS ?total)\n"
            "FROM NAMED WINDOW :short ON :s [RANGE PT2S STEP PT2S]\n"
            "FROM NAMED WINDOW :long ON :t [RANGE PT4S STEP PT4S]\n"
            "WHERE { WINDOW :short { ?s a :Sensor } WINDOW :long { ?s :value ?v } }")
    ev = InstanceEvaluator(text, schema)
    a_type = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    out = ev.push((iri("t1"), a_type, iri("Thermometer")), 100, iri("s"))
    out += ev.push((iri("t1"), iri("value"), num(3)), 200, iri("t"))
    out += ev.push((iri("t1"), iri("value"), num(4)), 2100, iri("t"))
    out += ev.push((iri("t1"), a_type, iri("Thermometer")), 2500, iri("s"))
    out += ev.finish()
    # at 2 s the long window has no closed instance yet: it contributes nothing to the join
    assert rows(out) == [(0, 2000, [{"sensors": num(0), "total": num(0)}]),
                         (0, 4000, [{"sensors": num(1), "total": num(7)}])]


def test_which_mode_a_query_gets() -> None:
    conjunctive = query("?o", "WINDOW :w { ?o :room :r1 }")
    assert isinstance(parse_for_evaluation(conjunctive), Query)
    assert isinstance(parse_for_evaluation(conjunctive, per_instance=True), InstanceQuery)
    assert isinstance(parse_for_evaluation(query("?o", "WINDOW :w { ?o :room :r1 }", register="ISTREAM")),
                      InstanceQuery)
    assert isinstance(parse_for_evaluation(query("(COUNT(*) AS ?n)", "WINDOW :w { ?o :room :r1 }")), InstanceQuery)


@pytest.mark.parametrize("where, tail, message, line", [
    ("WINDOW :w { ?o :room ?r { SELECT ?o WHERE { ?o :x ?y } } }", "", "subqueries are not supported", 5),
    ("WINDOW :w { ?o :p/:q ?r }", "", "property paths are not supported", 5),
    ("WINDOW :w { ?o :room ?r FILTER(?r = :a || EXISTS { ?o :x ?y }) }", "", "EXISTS inside an expression", 5),
    ("WINDOW :w { ?o :room ?r", "", "SPARQL syntax error", 5),
])
def test_unsupported_and_wrong_queries_are_refused_with_where(where: str, tail: str, message: str, line: int) -> None:
    with pytest.raises(QuerySyntaxError) as refused:
        parse_for_evaluation(query("(COUNT(*) AS ?n)", where, tail=tail))
    assert message in str(refused.value) and refused.value.line == line


def test_edgewave_match_prints_one_line_per_instance(tmp_path, capsys) -> None:
    q = tmp_path / "avg.rq"
    q.write_text(query("?room (AVG(?v) AS ?avg)", "WINDOW :w { ?o :room ?room ; :value ?v }",
                       window="[RANGE PT5S STEP PT5S]", tail="GROUP BY ?room ORDER BY ?room"))
    stream = tmp_path / "s.tsv"
    lines = []
    for ts, room, value in [(0, "r1", 20), (1000, "r1", 23), (2000, "r2", 30), (6000, "r2", 31)]:
        obs = iri(f"o{ts}")
        lines += [f"{ts}\t{obs} {iri('room')} {iri(room)} .", f"{ts}\t{obs} {iri('value')} {num(value)} ."]
    stream.write_text("\n".join(lines) + "\n")
    assert match_cli.main(["match", "--query", str(q), "--stream", str(stream)]) == 0
    out, err = capsys.readouterr()
    reports = [json.loads(line) for line in out.splitlines()]
    decimal = "<http://www.w3.org/2001/XMLSchema#decimal>"
    assert reports == [
        {"query": "q", "window": {"start": 0, "end": 5000}, "stream": "RSTREAM",
         "rows": [{"room": iri("r1"), "avg": f'"21.5"^^{decimal}'}, {"room": iri("r2"), "avg": f'"30.0"^^{decimal}'}]},
        {"query": "q", "window": {"start": 5000, "end": 10000}, "stream": "RSTREAM",
         "rows": [{"room": iri("r2"), "avg": f'"31.0"^^{decimal}'}]},
    ]
    assert "instances[q]=2 entailed[q]=0 late_triples[q]=0" in err


def test_edgewave_match_counts_what_the_schema_entailed_for_a_per_instance_query(tmp_path, capsys) -> None:
    q = tmp_path / "sum.rq"
    q.write_text(query("(SUM(?v) AS ?total)", "WINDOW :w { ?o :value ?v }", window="[RANGE PT5S STEP PT5S]"))
    schema = tmp_path / "schema.nt"
    schema.write_text(f"{iri('temp')} <http://www.w3.org/2000/01/rdf-schema#subPropertyOf> {iri('value')} .\n")
    stream = tmp_path / "s.tsv"
    stream.write_text("".join(f"{ts}\t{iri(f'o{ts}')} {iri('temp')} {num(ts // 1000)} .\n" for ts in (0, 1000, 2000)))
    assert match_cli.main(["match", "--schema", str(schema), "--query", str(q), "--stream", str(stream)]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["rows"] for line in out.splitlines()] == [
        [{"total": '"3"^^<http://www.w3.org/2001/XMLSchema#integer>'}]]
    assert "instances[q]=1 entailed[q]=3 late_triples[q]=0" in err


def test_periodic_reports_the_first_instance_after_each_period_and_bad_policies_are_refused() -> None:
    text = query("(COUNT(*) AS ?n)", "WINDOW :w { ?o :value ?v }", window="[RANGE PT1S STEP PT1S]")
    ev = InstanceEvaluator(text, report="periodic:PT3S")
    out = []
    for ts in (0, 1500, 2500, 4200, 6100, 7000):
        out += reading(ev, ts, "a", "r", 1)
    out += ev.finish()
    # instances end at 1, 2, 3, ..., 8 s: reported are the first at or after 0 s, 3 s and 6 s
    # ([5 s, 6 s) holds nothing: COUNT(*) of the empty group, 0)
    assert [(r.end, r.rows) for r in out] == [(1000, [{"n": num(1)}]), (3000, [{"n": num(1)}]),
                                             (6000, [{"n": num(0)}])]
    for bad in ("periodic", "periodic:0s", "sometimes"):
        with pytest.raises(ValueError, match="report policy"):
            InstanceEvaluator(text, report=bad)


def test_explain_prints_the_per_instance_network(tmp_path, capsys) -> None:
    q = tmp_path / "q.rq"
    q.write_text(query("?room (AVG(?v) AS ?avg)", "WINDOW :w { ?o :room ?room ; :value ?v "
                       "OPTIONAL { ?o :sensor ?s } FILTER(?v > 2) }", tail="GROUP BY ?room ORDER BY ?room LIMIT 2"))
    assert match_cli.main(["match", "--explain", "--query", str(q)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1:] == [
        "per-instance query q (RSTREAM)",
        f"  window {iri('w')}: RANGE 10000 ms STEP 5000 ms on {iri('s')}",
        "  aggregate, GROUP BY 1 key(s): AVG -> ?__agg_1__, SAMPLE -> ?__agg_2__",
        f'    filter ?v > "2"^^{INT}',
        "      optional (LeftJoin) on ?o",
        "        join on ?o",
        f"          pattern [?o {iri('room')} ?room] over window {iri('w')}",
        f"          pattern [?o {iri('value')} ?v] over window {iri('w')}",
        f"        pattern [?o {iri('sensor')} ?s] over window {iri('w')}",
        "  read off at close: extend ?room, extend ?avg, ORDER BY (1 keys), project ?room ?avg, OFFSET 0 LIMIT 2",
    ]


def test_a_config_document_takes_a_per_instance_query_with_its_report_policy() -> None:
    """A gateway runs per-instance queries: the check parses them (errors with line and
    column), keeps their report policy (``ew:report``, default non-empty) and refuses one
    on a continuous pattern."""
    from edgewave.agent.engine.config_check import check_config_document
    from edgewave.shared.configdoc import ConfigRejected

    def document(text: str, extra: str = "") -> str:
        return ('@prefix ew: <https://edgewave.dev/ns#> .\new:config { [] a ew:GatewayConfig ;\n'
                f'  ew:pattern [ a ew:Pattern ; ew:name "avg" ; ew:query """{text}""" {extra}] . }}\n')
    average = query("(AVG(?v) AS ?avg)", "WINDOW :w { ?o :value ?v }")
    checked = check_config_document(document(average), "trig")
    assert list(checked.instance_queries) == ["q"] and checked.reports == {"q": "non-empty"}
    checked = check_config_document(document(average, '; ew:report "periodic:PT1M" '), "trig")
    assert checked.reports == {"q": "periodic:PT1M"}
    with pytest.raises(ConfigRejected, match="ew:report policy 'weekly': expected one of"):
        check_config_document(document(average, '; ew:report "weekly" '), "trig")
    with pytest.raises(ConfigRejected, match="applies to per-instance queries only"):
        check_config_document(document(query("?o", "WINDOW :w { ?o :value ?v }"), '; ew:report "on-change" '),
                              "trig")
    with pytest.raises(ConfigRejected) as refused:
        check_config_document(document(query("(AVG(?v) AS ?avg)", "WINDOW :w { ?o :value ?v ")), "trig")
    assert "parse error in pattern avg at line" in refused.value.reason


def test_edgewave_match_warns_of_a_stream_no_per_instance_query_reads(tmp_path, capsys) -> None:
    q = tmp_path / "q.rq"
    q.write_text(query("(COUNT(*) AS ?n)", "WINDOW :w { ?o :value ?v }"))
    stream = tmp_path / "s.tsv"
    stream.write_text(f"0\t{iri('o')} {iri('value')} {num(1)} .\n")
    assert match_cli.main(["match", "--query", str(q), "--stream", f"{iri('elsewhere')}={stream}"]) == 0
    err = capsys.readouterr().err
    assert f"stream {iri('elsewhere')} ({stream}) is read by no query" in err
    assert f"no --stream feeds {iri('s')}, which query q reads" in err


def _stream_with_noise() -> list[tuple[int, tuple[str, str, str]]]:
    """Readings, triples no pattern reads (some alone in their instance), a self-loop,
    repeated triples and late ones: every path a streamed triple can take."""
    items = []
    for ts in range(0, 30000, 700):
        obs = iri(f"o{ts}")
        items += [(ts, (obs, iri("value"), num(ts % 7))), (ts, (obs, iri("unread"), num(1))),
                  (ts, (obs, iri("room"), iri(f"r{ts % 3}")))]
    items += [(31000, (iri("x"), iri("unread"), num(2))),  # an instance holding only unread triples
              (45000, (iri("x"), iri("unread"), iri("x"))),  # and a self-loop
              (45500, (iri("y"), iri("value"), num(1))), (45500, (iri("y"), iri("value"), num(1))),
              (45200, (iri("z"), iri("unread"), num(3))),  # late, unread
              (45300, (iri("z"), iri("value"), num(4)))]  # late, read
    return items


@pytest.mark.parametrize("report", ["non-empty", "window-close", "on-change"])
def test_push_many_reports_what_push_does(report: str) -> None:
    text = query("?room (COUNT(*) AS ?n) (SUM(?v) AS ?sum)", "WINDOW :w { ?o :value ?v OPTIONAL { ?o :room ?room } }",
                 window="[RANGE PT5S STEP PT1S]", tail="GROUP BY ?room")
    one, many = InstanceEvaluator(text, report=report), InstanceEvaluator(text, report=report)
    by_push = [r for ts, triple in _stream_with_noise() for r in one.push(triple, ts)] + one.finish()
    by_many: list = []
    assert many.push_many(_stream_with_noise(), None, by_many.extend) == len(_stream_with_noise())
    by_many += many.finish()
    assert by_many == by_push and by_push
    assert (many.triples_in, many.late_triples, many.entailed) == (one.triples_in, one.late_triples, one.entailed)


def test_triples_no_pattern_reads_still_make_an_instance_non_empty() -> None:
    ev = InstanceEvaluator(query("(COUNT(*) AS ?n)", "WINDOW :w { ?o :value ?v }", window="[RANGE PT1S STEP PT1S]"))
    out = ev.push((iri("a"), iri("unread"), num(1)), 500)
    out += ev.push((iri("b"), iri("value"), num(1)), 2500)
    out += ev.push((iri("c"), iri("unread"), num(1)), 4200)
    out += ev.finish()
    assert rows(out) == [(0, 1000, [{"n": num(0)}]), (2000, 3000, [{"n": num(1)}]), (4000, 5000, [{"n": num(0)}])]


def test_an_aggregate_argument_shared_by_the_rows_of_several_groups() -> None:
    """One offer joined with each of its product's types: its price counts once per type, and
    a group key given back through SAMPLE (rdflib's way to select ?type) is the key."""
    ev = InstanceEvaluator(query(
        "?type (AVG(xsd:decimal(STR(?price))) AS ?avg) (COUNT(*) AS ?n)",
        "WINDOW :w { ?offer :product ?product ; :price ?price . ?product a ?type }",
        window="[RANGE PT10S STEP PT10S]", tail="GROUP BY ?type").replace(
            "PREFIX :", "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\nPREFIX :"))
    a = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    usd = f"<{EX}USD>"
    for ts, offer, product, price in [(1, "o1", "p1", "10.5"), (2, "o2", "p2", "20"), (3, "o3", "p1", "1.5")]:
        ev.push((iri(offer), iri("product"), iri(product)), ts)
        ev.push((iri(offer), iri("price"), f'"{price}"^^{usd}'), ts)
    for product, types in [("p1", ["T", "U"]), ("p2", ["U"])]:
        for name in types:
            ev.push((iri(product), a, iri(name)), 5)
    dec = "<http://www.w3.org/2001/XMLSchema#decimal>"
    got = sorted((r["type"], r["avg"], r["n"]) for r in ev.finish()[0].rows)
    assert got == [(iri("T"), f'"6.0"^^{dec}', num(2)), (iri("U"), f'"10.66666666666666666666666667"^^{dec}', num(3))]


def test_regex_without_flags_and_group_concat_without_separator() -> None:
    """Arguments a query leaves out read as absent: REGEX's flags, GROUP_CONCAT's separator (" ")."""
    ev = InstanceEvaluator(query('?o (GROUP_CONCAT(?name) AS ?names)',
                                 'WINDOW :w { ?o :name ?name FILTER(REGEX(?name, "^k")) }',
                                 window="[RANGE PT10S STEP PT10S]", tail="GROUP BY ?o"))
    for ts, name in [(1, "kitchen"), (2, "hall"), (3, "kettle")]:
        ev.push((iri("o"), iri("name"), f'"{name}"'), ts)
    assert rows(ev.finish()) == [(0, 10000, [{"o": iri("o"), "names": '"kitchen kettle"'}])]


def test_a_query_compiles_the_same_from_its_algebra_sent_as_json() -> None:
    """A gateway compiles what its document reader sent: the algebra's JSON reads back equal,
    and the query evaluated from it gives the same rows."""
    from edgewave.agent.engine.per_instance import parse_instance_query
    from edgewave.agent.engine.per_instance.algebra import from_json, to_json

    text = query("?room (AVG(?v) AS ?avg) (COUNT(DISTINCT ?o) AS ?n)",
                 "WINDOW :w { ?o :room ?room ; :value ?v OPTIONAL { ?o :label ?l } "
                 "FILTER NOT EXISTS { ?o :broken true } FILTER(?v > 1 && STRSTARTS(STR(?room), \"http\")) "
                 "BIND(?v * 2 AS ?twice) VALUES ?x { 1 UNDEF } }",
                 tail="GROUP BY ?room HAVING (COUNT(*) > 0) ORDER BY DESC(?avg) LIMIT 5")
    direct = parse_instance_query(text)
    sent = json.loads(json.dumps(to_json(direct.algebra)))
    again = parse_instance_query(text, algebra_of=lambda sparql: from_json(sent))
    assert again.algebra == direct.algebra
    assert again.compile().describe() == direct.compile().describe()
    results = []
    for parsed in (direct, again):
        ev = InstanceEvaluator(parsed)
        for ts, value in [(0, 5), (4000, 9), (6000, 7)]:
            reading(ev, ts, "a", "r1", value)
        results.append(rows(ev.finish()))
    assert results[0] == results[1] and results[0]

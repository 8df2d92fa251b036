// edgewave dashboard: the viewer's time zone, the custom range form, the matches chart and a per-instance
// query's charts (uPlot).
// No inline scripts anywhere (the Content-Security-Policy allows scripts from /static only).
(function () {
  "use strict";

  // Times on the server's pages and in CSV exports are in the browser's zone (cookie ew_tz).
  var tz = "UTC";
  try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { /* keep UTC */ }
  document.cookie = "ew_tz=" + encodeURIComponent(tz) + "; path=/; SameSite=Lax; max-age=31536000";

  var PALETTE = ["#1f6feb", "#d1495b", "#2e7d32", "#9a5b00", "#6f42c1", "#00838f", "#c2185b", "#5d4037"];

  function ready(fn) {
    if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn);
  }

  function csrf() { return document.body.getAttribute("data-csrf") || ""; }

  ready(function () {
    // htmx requests carry the CSRF token too (for the POSTs later pages make).
    document.body.addEventListener("htmx:configRequest", function (evt) {
      evt.detail.headers["X-CSRF-Token"] = csrf();
    });

    // CSV links: say which zone the times should be in.
    document.querySelectorAll("a[data-tz-link]").forEach(function (a) {
      a.href += (a.href.indexOf("?") >= 0 ? "&" : "?") + "tz=" + encodeURIComponent(tz);
    });

    // Custom range: the inputs are in the viewer's local time; the server takes epoch ms.
    var form = document.getElementById("custom-range");
    if (form) {
      form.addEventListener("submit", function (evt) {
        var from = new Date(form.elements.from_local.value).getTime();
        var to = new Date(form.elements.to_local.value).getTime();
        if (!(from < to)) { evt.preventDefault(); alert("The end must be after the start."); return; }
        form.elements.start.value = String(from);
        form.elements.end.value = String(to);
        form.elements.from_local.disabled = true;
        form.elements.to_local.disabled = true;
      });
    }

    // Filter forms with an optional local from/to (the live page): both given win over the preset select;
    // empty fields stay out of the URL.
    document.querySelectorAll("form[data-local-range]").forEach(function (f) {
      f.addEventListener("submit", function (evt) {
        var a = f.elements.from_local.value, b = f.elements.to_local.value;
        if (a || b) {
          var from = new Date(a).getTime(), to = new Date(b).getTime();
          if (!(from < to)) { evt.preventDefault(); alert("Give both times, the end after the start."); return; }
          f.elements.start.value = String(from);
          f.elements.end.value = String(to);
          f.elements.range.disabled = true;
        } else {
          f.elements.start.disabled = true;
          f.elements.end.disabled = true;
        }
        f.elements.from_local.disabled = true;
        f.elements.to_local.disabled = true;
        Array.prototype.forEach.call(f.querySelectorAll("select"), function (s) { if (!s.value) s.disabled = true; });
      });
    });

    // A click on a term copies the exact term (N-Triples) it stands for; the raw-triples switch shows an evidence
    // block's statements exactly as the event gave them instead of as people read them.
    document.body.addEventListener("click", function (evt) {
      var target = evt.target;
      if (target.classList.contains("term") && target.hasAttribute("data-full")) {
        var full = target.getAttribute("data-full");
        if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(full).catch(function () {});
        target.classList.add("copied");
        setTimeout(function () { target.classList.remove("copied"); }, 1200);
      } else if (target.classList.contains("raw-toggle")) {
        var box = target.closest(".evidence, .evidence-page, details") || document.body;
        var raw = box.classList.toggle("show-raw");
        target.setAttribute("aria-pressed", raw ? "true" : "false");
        target.textContent = raw ? "Show the triples as read" : "Show the exact triples";
      }
    });

    var el = document.getElementById("matches-chart");
    if (el) drawMatches(el);
    var charts = document.getElementById("instance-charts");
    if (charts) drawInstances(charts);
    var live = document.getElementById("live-table");
    if (live) followLive(live);
    var alarms = document.getElementById("alarms-table");
    if (alarms) followAlarms(alarms);
    var parts = document.getElementById("config-parts");
    if (parts && parts.hasAttribute("data-validate")) editParts(parts);
  });

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text != null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function when(ms) { return ms == null ? "–" : new Date(ms).toLocaleString(); }

  // A term as people read it (the server's terms.py made the text), the exact term on hover and copied on a click.
  function term(shown) {
    var span = el("span", shown.text, "term");
    span.title = shown.full;
    span.setAttribute("data-full", shown.full);
    return span;
  }

  // A statement as people read it (shown: three terms from the server, or null) beside its exact text, which the
  // raw-triples switch shows instead.
  function statement(into, text, shown) {
    if (shown) {
      var st = el("span", null, "shown-statement");
      shown.forEach(function (x, i) { if (i) st.appendChild(document.createTextNode(" ")); st.appendChild(term(x)); });
      into.appendChild(st);
    }
    into.appendChild(el("code", text, shown ? "raw-statement" : null));
  }

  // An event's cell: title badge, absence/chained markers, message, then its values folded (as _event_cell.html).
  function eventCell(td, item) {
    var shown = item.shown || { title: item.pattern || item.kind, message: "", bindings: [] };
    var badge = el("span", shown.title, "badge " + (item.kind === "match" ? "offline" : "online") +
                   (shown.severity ? " severity-" + shown.severity : ""));
    td.appendChild(badge);
    markers(item.evidence || {}).forEach(function (m) {
      td.appendChild(document.createTextNode(" "));
      td.appendChild(m);
    });
    td.appendChild(document.createTextNode(" "));
    td.appendChild(el("span", shown.message, "message"));
    if (shown.bindings && shown.bindings.length) {
      var details = el("details", null, "values");
      var n = shown.bindings.length;
      details.appendChild(el("summary", n + (n === 1 ? " value" : " values")));
      var dl = el("dl", null, "values");
      shown.bindings.forEach(function (b) {
        dl.appendChild(el("dt", "?" + b.variable));
        var dd = el("dd");
        dd.appendChild(term(b));
        dl.appendChild(dd);
      });
      details.appendChild(dl);
      td.appendChild(details);
    }
  }

  // A short duration, as the server writes one (viewfmt.Formatter.duration): 45 s, 12 min, 3.5 h, 2.1 d.
  function duration(ms) {
    var s = ms / 1000;
    if (s < 90) return Math.round(s) + " s";
    if (s < 90 * 60) return Math.round(s / 60) + " min";
    if (s < 36 * 3600) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }

  // Badges for a match of an absence and for one built from a chained rule's matches.
  function markers(ev) {
    function marker(text, title) { var b = el("span", text, "badge marker"); b.title = title; return b; }
    var out = [];
    if (ev.expected && ev.expected.length) {
      out.push(marker("absence", "an absence: what was expected did not arrive in time"));
    }
    if (ev.derived_from && ev.derived_from.length) {
      out.push(marker("chained", "built from the matches of a chained rule"));
    }
    return out;
  }

  // What an absence expected and by when, and the rule matches a chained match was built from (links to their
  // evidence pages, for the ids the server made links of). Text only: all of it comes from a gateway.
  function absenceAndOrigin(ev, into) {
    if (ev.expected && ev.expected.length) {
      var box = el("div", null, "absence");
      var head = el("p");
      head.appendChild(el("strong", "Expected by " + when(ev.window_end)));
      head.appendChild(document.createTextNode(ev.waited_ms == null ? ", did not arrive:"
        : ", did not arrive within " + duration(ev.waited_ms) + " of the match's start:"));
      box.appendChild(head);
      var ul = el("ul", null, "expected");
      ev.expected.forEach(function (s) { var li = el("li"); li.appendChild(el("code", s)); ul.appendChild(li); });
      box.appendChild(ul);
      into.appendChild(box);
    }
    if (ev.derived_from && ev.derived_from.length) {
      var from = el("div", null, "derived-from");
      var p = el("p");
      p.appendChild(el("strong", "Built from:"));
      p.appendChild(document.createTextNode(" the rule match" + (ev.derived_from.length > 1 ? "es" : "") +
                                            " whose triples this match used"));
      from.appendChild(p);
      var links = el("ul");
      ev.derived_from.forEach(function (d) {
        var li = el("li");
        if (d.href) { var a = el("a", d.event_id); a.href = d.href; li.appendChild(a); }
        else { li.appendChild(el("code", d.event_id)); li.appendChild(el("span", " (not an event id)", "muted")); }
        links.appendChild(li);
      });
      from.appendChild(links);
      into.appendChild(from);
    }
  }

  // A match's evidence, unfolded on click: window, what an absence expected, the rule matches a chained match was
  // built from, contributing triples, entailed ones marked with their axioms.
  function evidencePanel(item, ev) {
    var details = el("details", null, "evidence");
    var n = ev.triples.length;
    var entailed = ev.triples.filter(function (t) { return t.entailed; }).length;
    var summary = n + (n === 1 ? " triple" : " triples") + (entailed ? ", " + entailed + " entailed" : "");
    if (ev.expected && ev.expected.length) summary += ", expected by " + when(ev.window_end);
    var origins = (ev.derived_from || []).length;
    if (origins) summary += ", built from " + origins + (origins === 1 ? " match" : " matches");
    details.appendChild(el("summary", summary));
    var meta = el("dl", null, "evidence-meta");
    meta.appendChild(el("dt", "Window"));
    meta.appendChild(el("dd", when(ev.window_start) + " – " + when(ev.window_end)));
    details.appendChild(meta);
    absenceAndOrigin(ev, details);
    if (ev.triples.some(function (t) { return t.shown; })) {
      var sw = el("p", null, "raw-switch");
      var toggle = el("button", "Show the exact triples", "link raw-toggle");
      toggle.type = "button";
      toggle.setAttribute("aria-pressed", "false");
      sw.appendChild(toggle);
      details.appendChild(sw);
    }
    var list = el("ol", null, "triples");
    ev.triples.forEach(function (t) {
      var li = el("li", null, "triple" + (t.entailed ? " entailed" : ""));
      if (t.time_ms != null) li.appendChild(el("span", when(t.time_ms) + " ", "muted"));
      statement(li, t.text, t.shown);
      if (t.entailed) {
        li.appendChild(document.createTextNode(" "));
        li.appendChild(el("span", "entailed", "badge lagging"));
        if (t.source) { var from = el("div", "from ", "muted"); statement(from, t.source, t.source_shown); li.appendChild(from); }
        if (t.axioms.length) {
          var ul = el("ul", null, "axioms");
          t.axioms.forEach(function (a, i) {
            var x = el("li");
            statement(x, a, (t.axioms_shown || [])[i]);
            ul.appendChild(x);
          });
          li.appendChild(ul);
        }
      }
      list.appendChild(li);
    });
    details.appendChild(list);
    if (item.kind === "match") {
      var link = el("a", "all of this match's evidence");
      link.href = "/matches/" + encodeURIComponent(item.id);
      details.appendChild(link);
    }
    return details;
  }

  // Alarms: server-sent events from /api/alarms/stream, one per changed alarm; the row is replaced or put on top.
  function followAlarms(table) {
    var body = table.querySelector("tbody");
    var badge = document.getElementById("alarms-state");
    var STATE_BADGE = { active: "offline", acknowledged: "lagging", cleared: "online" };

    function row(a) {
      var tr = el("tr", null, "alarm-" + a.state + " fresh");
      tr.setAttribute("data-alarm-id", String(a.id));
      tr.setAttribute("data-state", a.state);
      tr.setAttribute("data-count", String(a.count));
      var first = el("td");
      var link = el("a", when(a.last_seen_ms));
      link.href = "/alarms/" + a.id;
      first.appendChild(link);
      tr.appendChild(first);
      var st = el("td");
      st.appendChild(el("span", a.state, "badge " + STATE_BADGE[a.state]));
      tr.appendChild(st);
      tr.appendChild(el("td", a.gateway));
      var what = el("td", a.pattern, "event");               // the pattern, then what its newest match says
      if (a.message) what.appendChild(el("div", a.message, "message"));
      tr.appendChild(what);
      var key = el("td", null, "value");
      (a.shown_key || []).forEach(function (k, i) {
        if (i) key.appendChild(el("br"));
        key.appendChild(document.createTextNode("?" + k.variable + " = "));
        key.appendChild(term(k));
      });
      if (!(a.shown_key || []).length) key.textContent = "–";
      tr.appendChild(key);
      tr.appendChild(el("td", String(a.count), "n"));
      tr.appendChild(el("td", when(a.first_seen_ms)));
      return tr;
    }

    function update(evt) {
      var a = JSON.parse(evt.data);
      var old = body.querySelector("tr[data-alarm-id='" + a.id + "']");
      if (old) old.remove();
      var empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      var wantOpen = table.getAttribute("data-src").indexOf("state=all") < 0;
      if (wantOpen && a.state === "cleared") return;
      body.insertBefore(row(a), body.firstChild);
    }

    function state(name) { badge.textContent = name; badge.setAttribute("data-state", name);
      badge.className = "badge " + (name === "live" ? "online" : "lagging"); }

    var source = new EventSource(table.getAttribute("data-src"));
    source.addEventListener("alarm", update);
    source.onopen = function () { state("live"); };
    source.onerror = function () {
      state("reconnecting");
      fetch("/api/alarms?since=1h", { credentials: "same-origin" }).then(function (r) {
        if (r.status === 401) { source.close(); window.location.href = "/login?next=/alarms"; }
      });
    };
  }

  // Live events: server-sent events from /api/live/stream, newest on top, at most MAX_ROWS kept.
  function followLive(table) {
    var MAX_ROWS = 200;
    var body = table.querySelector("tbody");
    var badge = document.getElementById("live-state");
    var count = 0;

    function cell(row, text, cls) {
      var td = document.createElement("td");
      if (cls) td.className = cls;
      td.textContent = text;
      row.appendChild(td);
      return td;
    }

    function add(evt) {
      var item = JSON.parse(evt.data);
      if (count === 0) body.innerHTML = "";
      count += 1;
      var row = document.createElement("tr");
      row.className = "live-" + item.kind;
      row.setAttribute("data-seq", String(item.seq));
      row.setAttribute("data-id", item.id);
      var when = item.window_end || item.ingest_ms;
      cell(row, new Date(when).toLocaleString()).title = "ingested " + new Date(item.ingest_ms).toLocaleString();
      cell(row, item.gateway);
      eventCell(cell(row, "", "event"), item);
      var evidence = cell(row, "", "evidence-cell");
      var ev = item.evidence || { triples: [] };
      if (ev.triples.length || (ev.expected || []).length || (ev.derived_from || []).length) {
        evidence.appendChild(evidencePanel(item, ev));
      }
      body.insertBefore(row, body.firstChild);
      while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
      table.setAttribute("data-count", String(count));
    }

    function state(name) { badge.textContent = name; badge.setAttribute("data-state", name);
      badge.className = "badge " + (name === "live" ? "online" : "lagging"); }

    var source = new EventSource(table.getAttribute("data-src"));
    source.addEventListener("match", add);
    source.addEventListener("significant", add);
    source.onopen = function () { state("live"); };
    source.onerror = function () {
      state("reconnecting");
      // A lost session makes every retry fail: check once and go to the login page.
      fetch("/api/live?limit=1", { credentials: "same-origin" }).then(function (r) {
        if (r.status === 401) { source.close(); window.location.href = "/login?next=/live"; }
      });
    };
  }

  // A per-instance query's numbers: one uPlot chart per numeric variable, one series per group
  // (the values of the other variables), over the instances' ends. Labels come from gateways: text only.
  function drawInstances(box) {
    var plots = [];

    function size(div) { return { width: Math.max(260, div.clientWidth), height: div.clientWidth < 500 ? 220 : 280 }; }

    function note(text) {
      var p = el("p", text, "chart-empty");
      box.appendChild(p);
    }

    function render(data) {
      plots.forEach(function (p) { p.destroy(); });
      plots = [];
      box.innerHTML = "";
      box.setAttribute("data-instances", String(data.instances));
      if (data.charts.length === 0) {
        note(data.rows ? "No numeric variable to chart: every variable has values that are not numbers."
                       : "No instances of this query ended in this range.");
        box.setAttribute("data-drawn", "empty");
        return;
      }
      if (data.truncated) note("Charting the newest " + data.rows + " rows of this range.");
      data.charts.forEach(function (chart) {
        var fig = el("figure", null, "instance-chart");
        fig.setAttribute("data-variable", chart.variable);
        fig.setAttribute("data-series", String(chart.series.length));
        var points = 0;
        chart.series.forEach(function (s) { s.values.forEach(function (v) { if (v !== null) points++; }); });
        fig.setAttribute("data-points", String(points));
        var caption = "?" + chart.variable + (data.group_by.length ? " per " + data.group_by.map(function (g) {
          return g === "gateway" ? "gateway" : "?" + g; }).join(", ") : "");
        if (chart.groups > chart.series.length) caption += " (the first " + chart.series.length + " of " + chart.groups + ")";
        fig.appendChild(el("figcaption", caption));
        var div = el("div", null, "chart");
        fig.appendChild(div);
        box.appendChild(fig);
        var opts = {
          width: size(div).width, height: size(div).height,
          scales: { x: { time: true } },
          axes: [{}, { size: 60 }],
          series: [{ label: "instance end" }].concat(chart.series.map(function (s, i) {
            return { label: s.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true,
                     points: { show: data.x.length < 60 } };
          })),
        };
        var plot = new uPlot(opts, [data.x].concat(chart.series.map(function (s) { return s.values; })), div);
        plot._ewDiv = div;
        plots.push(plot);
      });
      box.setAttribute("data-drawn", "chart");
    }

    function load() {
      fetch(box.getAttribute("data-src"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          if (r.status === 401) { window.location.href = "/login"; throw new Error("logged out"); }
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.json();
        })
        .then(render)
        .catch(function (err) { box.setAttribute("data-error", String(err)); });
    }

    load();
    setInterval(load, 60000);
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { plots.forEach(function (p) { p.setSize(size(p._ewDiv)); }); }, 150);
    });
  }

  function drawMatches(el) {
    var plot = null;

    function size() { return { width: Math.max(260, el.clientWidth), height: el.clientWidth < 500 ? 240 : 320 }; }

    function load() {
      fetch(el.getAttribute("data-src"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          if (r.status === 401) { window.location.href = "/login"; throw new Error("logged out"); }
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.json();
        })
        .then(function (chart) { render(chart); })
        .catch(function (err) { el.setAttribute("data-error", String(err)); });
    }

    function render(chart) {
      var names = Object.keys(chart.series);
      var data = [chart.x].concat(names.map(function (n) { return chart.series[n]; }));
      var points = 0;
      names.forEach(function (n) { points += chart.series[n].length; });
      el.setAttribute("data-patterns", names.join(","));
      el.setAttribute("data-points", String(points));
      el.setAttribute("data-total", String(names.reduce(function (s, n) { return s + chart.totals[n]; }, 0)));
      var key = names.join("\u0000");
      if (plot && plot._ewKey === key) { plot.setData(data); return; }
      if (plot) { plot.destroy(); plot = null; }
      el.innerHTML = "";
      if (names.length === 0) {
        var empty = document.createElement("p");
        empty.className = "chart-empty";
        empty.textContent = "No matches in this period.";
        el.appendChild(empty);
        el.setAttribute("data-drawn", "empty");
        return;
      }
      var opts = {
        width: size().width, height: size().height,
        scales: { x: { time: true } },
        axes: [{}, { label: "matches per " + Math.round(chart.bucket_ms / 60000) + " min", size: 60 }],
        series: [{ label: "time" }].concat(names.map(function (n, i) {
          return { label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5, points: { show: false } };
        })),
      };
      plot = new uPlot(opts, data, el);
      plot._ewKey = key;
      el.setAttribute("data-drawn", "chart");
    }

    load();
    setInterval(load, 30000);
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { if (plot) plot.setSize(size()); }, 150);
    });
  }

  // The configuration editor made of parts (config_parts.html): after each edit (400 ms without one) the
  // parts go to /config/validate, which assembles the document and checks it as a push would, with the
  // agent's own check; its reason is shown beside the part it concerns, and each query's highlighted
  // preview (the server's highlighter) is replaced. Only the newest answer counts.
  function editParts(form) {
    var url = form.getAttribute("data-validate");
    var status = form.querySelector(".parts-status");
    var list = document.getElementById("pattern-parts");
    var template = document.getElementById("pattern-part-template");
    var timer = null, asked = 0;

    function cards() { return list.querySelectorAll(".pattern-part"); }

    function clear() {
      form.querySelectorAll(".part-error").forEach(function (p) { p.hidden = true; p.textContent = ""; });
      form.querySelectorAll(".invalid").forEach(function (e) { e.classList.remove("invalid"); });
    }

    function mark(box, reason) {
      if (!box) return;
      box.classList.add("invalid");
      var p = box.querySelector(".part-error");
      if (p) { p.textContent = reason; p.hidden = false; }
    }

    function show(answer) {
      clear();
      var all = cards();
      (answer.highlighted || []).forEach(function (html, i) {
        var preview = all[i] && all[i].querySelector(".query-preview");
        if (preview) preview.innerHTML = html;   // escaped by the server's highlighter: spans around text
      });
      status.classList.toggle("error", !answer.ok);
      status.classList.toggle("ok", !!answer.ok);
      if (answer.ok) {
        status.textContent = "Valid: the agent's check compiles this document.";
        form.setAttribute("data-state", "valid");
        return;
      }
      form.setAttribute("data-state", "invalid");
      var reason = answer.reason || answer.error || "not valid";
      if (answer.part === "pattern" && answer.index != null) {
        mark(all[answer.index], reason);
        status.textContent = "Not valid: pattern " + (answer.pattern || answer.index + 1) + ", below.";
      } else if (answer.part && answer.part !== "document" && form.querySelector("[data-part=" + answer.part + "]")) {
        mark(form.querySelector("[data-part=" + answer.part + "]"), reason);
        status.textContent = "Not valid: the " + answer.part + " part, below.";
      } else {
        status.textContent = "Not valid: " + reason;
      }
    }

    function validate() {
      var mine = ++asked;
      form.setAttribute("data-state", "checking");
      fetch(url, { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin",
                   headers: { "X-CSRF-Token": csrf() } })
        .then(function (r) { return r.json(); })
        .then(function (answer) { if (mine === asked) show(answer); })
        .catch(function () {
          if (mine !== asked) return;
          status.textContent = "Could not check the document (is the dashboard reachable?).";
          form.setAttribute("data-state", "unknown");
        });
    }

    function later() {
      var diff = document.getElementById("parts-diff");
      if (diff) diff.textContent = "";     // the difference shown was of the parts before this edit
      clearTimeout(timer);
      timer = setTimeout(validate, 400);
    }

    form.addEventListener("input", function (evt) {
      var card = evt.target.closest(".pattern-part");
      if (card && evt.target.name === "pattern_name") {
        card.querySelector("legend").textContent = evt.target.value || "New pattern";
        card.setAttribute("data-pattern", evt.target.value);
      }
      later();
    });
    form.addEventListener("click", function (evt) {
      if (evt.target.id === "add-pattern" && template) {
        list.appendChild(template.content.cloneNode(true));
        var added = cards()[cards().length - 1];
        added.querySelector("input[name=pattern_name]").focus();
        later();
      } else if (evt.target.classList.contains("remove-pattern")) {
        evt.target.closest(".pattern-part").remove();
        later();
      }
    });
    validate();
  }
})();

// edgewave dashboard: the viewer's time zone, the custom range form, and the matches chart (uPlot).
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

    var el = document.getElementById("matches-chart");
    if (el) drawMatches(el);
    var live = document.getElementById("live-table");
    if (live) followLive(live);
  });

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
      var what = cell(row, "");
      var badge = document.createElement("span");
      badge.className = "badge " + (item.kind === "match" ? "offline" : "online");
      badge.textContent = item.kind === "match" ? item.pattern : "significant";
      what.appendChild(badge);
      if (item.kind !== "match" && item.property) {
        what.appendChild(document.createTextNode(" " + item.property + " = " + (item.result == null ? "" : item.result)));
      }
      cell(row, (item.bindings || []).map(function (b) { return "?" + b.variable + " = " + b.value; }).join("\n"),
           "value bindings");
      var evidence = cell(row, "");
      var triples = item.triples || [];
      if (triples.length) {
        var details = document.createElement("details");
        var summary = document.createElement("summary");
        summary.textContent = triples.length + (triples.length === 1 ? " triple" : " triples");
        var pre = document.createElement("pre");
        pre.textContent = triples.join("\n");
        details.appendChild(summary);
        details.appendChild(pre);
        evidence.appendChild(details);
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
})();

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
  });

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

// pytest-opprof history page: draws each chart (SVG) and the table of change points from
// the JSON embedded in #opprof-history.  Text goes in through textContent only, so a test
// id or op name can never become markup.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("opprof-history").textContent);
  var SVG = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
  var ROWS = DATA.changes;
  ROWS.forEach(function (r, i) { r.k = i; });
  var PAGE = 200;
  var COLORS = ["#5a8dd6", "#e8a33d", "#8e7cc3", "#4aa68f", "#d46a6a", "#a3a23c", "#c77cb5", "#6bb0c9"];
  var OTHER = "other ops";
  var tip = document.getElementById("tip");
  var state = { key: "k", asc: true, text: "", test: null, limit: PAGE };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, cls) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (cls) node.setAttribute("class", cls);
    return node;
  }
  // Units as the terminal and the HTML report spell them (units.js, inlined before this).
  var fmtTime = opprofUnits.fmtTime, fmtBytes = opprofUnits.fmtBytes;
  var fmtFlops = opprofUnits.fmtFlops, fmtValue = opprofUnits.fmtValue;
  function runLabel(run) {
    return (run[0] ? run[0].slice(0, 7) : "no commit") + " (" + run[1] + ")" + (run[2] ? " dirty" : "");
  }

  // -- one chart ---------------------------------------------------------------------
  var W = 1000, H = 230, L = 96, R = 14, T = 30, B = 34;
  function niceTop(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
  }
  function segments(values) { // runs of consecutive non-null values, as [first, last]
    var out = [], start = -1;
    for (var r = 0; r <= values.length; r++) {
      var here = r < values.length && values[r] !== null;
      if (here && start < 0) start = r;
      if (!here && start >= 0) { out.push([start, r - 1]); start = -1; }
    }
    return out;
  }
  function chart(c, index) {
    var machine = DATA.machines[c.m], runs = machine.runs, n = runs.length;
    var fig = el("figure", "chart");
    fig.id = "chart-" + index;
    fig.dataset.test = c.t;
    fig.dataset.family = c.fam;
    var h = el("h3");
    h.appendChild(el("span", "mono", c.t));
    fig.appendChild(h);
    fig.appendChild(el("p", "note", c.label + " · " + n + " runs" +
      (DATA.machines.length > 1 ? " · machine " + machine.fp + " (" + machine.desc + ")" : "")));
    var list = el("ul", "steps");
    c.steps.forEach(function (s) { list.appendChild(el("li", s[3] > 0 ? "up" : "down", s[2])); });
    fig.appendChild(list);

    var present = c.total.map(function (v, r) {
      return v !== null || c.ops.some(function (o) { return o[1][r] !== null; });
    });
    var cum = c.ops.map(function () { return new Array(n); });
    var top = 0, r, k;
    for (r = 0; r < n; r++) {
      var sum = 0;
      for (k = 0; k < c.ops.length; k++) {
        sum += c.ops[k][1][r] || 0;
        cum[k][r] = present[r] ? sum : null;
      }
      if (present[r]) top = Math.max(top, sum, c.total[r] || 0);
    }
    var ymax = niceTop(top * 1.05);
    var dx = n > 1 ? (W - L - R) / (n - 1) : 0;
    function x(i) { return n > 1 ? L + i * dx : (L + W - R) / 2; }
    function y(v) { return T + (H - T - B) * (1 - v / ymax); }
    var box = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    box.setAttribute("aria-label", c.label + " of " + c.t);
    [0, 0.5, 1].forEach(function (f) {
      box.appendChild(svg("line", { x1: L, x2: W - R, y1: y(ymax * f), y2: y(ymax * f) }, "axis"));
      var t = svg("text", { x: L - 6, y: y(ymax * f) + 4, "text-anchor": "end" }, "tick");
      t.textContent = f === 0 ? "0" : fmtValue(ymax * f, c.unit);
      box.appendChild(t);
    });
    // The stack, bottom first: one closed path per stretch of runs that have the test.
    c.ops.forEach(function (op, k) {
      var color = op[0] === OTHER ? "#c9ced8" : COLORS[k % COLORS.length];
      segments(cum[k]).forEach(function (seg) {
        var d = "", i;
        for (i = seg[0]; i <= seg[1]; i++) d += (i === seg[0] ? "M" : "L") + x(i).toFixed(1) + "," + y(cum[k][i]).toFixed(1);
        if (seg[0] === seg[1]) d += "L" + (x(seg[0]) + 1).toFixed(1) + "," + y(cum[k][seg[0]]).toFixed(1);
        for (i = seg[1]; i >= seg[0]; i--) {
          var low = k > 0 ? cum[k - 1][i] : 0;
          d += "L" + (x(i) + (seg[0] === seg[1] && i === seg[1] ? 1 : 0)).toFixed(1) + "," + y(low).toFixed(1);
        }
        var p = svg("path", { d: d + "Z", fill: color, "fill-opacity": "0.75" }, "area");
        p.dataset.op = op[0];
        box.appendChild(p);
      });
    });
    segments(c.total).forEach(function (seg) {
      var d = "";
      for (var i = seg[0]; i <= seg[1]; i++) d += (i === seg[0] ? "M" : "L") + x(i).toFixed(1) + "," + y(c.total[i]).toFixed(1);
      box.appendChild(svg("path", { d: d }, "total"));
    });
    if (n <= 80) {
      c.total.forEach(function (v, i) {
        if (v !== null) box.appendChild(svg("circle", { cx: x(i), cy: y(v), r: 2.2 }, "dot"));
      });
    }
    // First and last run under the axis.
    [[0, "start"], [n - 1, "end"]].forEach(function (a, j) {
      if (j === 1 && n < 2) return;
      var t = svg("text", { x: x(a[0]), y: H - B + 16, "text-anchor": a[1] }, "run-label");
      t.textContent = runLabel(runs[a[0]]);
      box.appendChild(t);
    });
    // Each step: a dashed mark between the last run before it and the first run after.
    c.steps.forEach(function (s) {
      var at = s[0], xm = at > 0 ? (x(at - 1) + x(at)) / 2 : x(at), dir = s[3] > 0 ? "up" : "down";
      var g = svg("g", {}, "step");
      g.dataset.run = at;
      g.appendChild(svg("line", { x1: xm, x2: xm, y1: T - 6, y2: H - B }, "mark " + dir));
      var anchor = xm > W - 150 ? "end" : xm < L + 80 ? "start" : "middle";
      var label = svg("text", { x: xm, y: T - 10, "text-anchor": anchor }, "mark-label " + dir);
      label.textContent = s[1];
      g.appendChild(label);
      var title = svg("title");
      title.textContent = s[2];
      g.appendChild(title);
      box.appendChild(g);
    });
    var guide = svg("line", { x1: 0, x2: 0, y1: T, y2: H - B, visibility: "hidden" }, "guide");
    box.appendChild(guide);
    var hit = svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B }, "hit");
    box.appendChild(hit);
    function show(e) {
      var rect = box.getBoundingClientRect();
      var px = (e.clientX - rect.left) * W / rect.width;
      var i = n > 1 ? Math.max(0, Math.min(n - 1, Math.round((px - L) / dx))) : 0;
      guide.setAttribute("x1", x(i)); guide.setAttribute("x2", x(i));
      guide.setAttribute("visibility", "visible");
      var lines = [runLabel(runs[i]), c.label.split(";")[0] + ": " + fmtValue(c.total[i], c.unit)];
      for (var k = c.ops.length - 1; k >= 0; k--) {
        lines.push(c.ops[k][0] + ": " + fmtValue(c.ops[k][1][i], c.unit));
      }
      c.steps.forEach(function (s) { if (s[0] === i) lines.push("step: " + s[2]); });
      tip.textContent = lines.join("\n");
      tip.hidden = false;
      tip.style.left = Math.max(0, Math.min(e.clientX + 12, window.innerWidth - 430)) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    }
    hit.addEventListener("mousemove", show);
    hit.addEventListener("mouseleave", function () { tip.hidden = true; guide.setAttribute("visibility", "hidden"); });
    fig.appendChild(box);

    var legend = el("div", "keys");
    function key(color, name, cls) {
      var item = el("span");
      var sw = el("span", "sw");
      sw.style.background = color;
      item.appendChild(sw);
      item.appendChild(el("span", cls, name));
      legend.appendChild(item);
    }
    key("var(--fg)", c.label.split(";")[0], null);
    for (k = c.ops.length - 1; k >= 0; k--) {
      var name = c.ops[k][0];
      key(name === OTHER ? "#c9ced8" : COLORS[k % COLORS.length],
        name + (c.stepped.indexOf(name) >= 0 ? " (stepped)" : ""), name === OTHER ? null : "op-name");
    }
    fig.appendChild(legend);
    return fig;
  }
  var section = document.getElementById("charts");
  DATA.charts.forEach(function (c, i) { section.appendChild(chart(c, i)); });

  // -- the table of change points ---------------------------------------------------------
  function sortValue(row, key) {
    if (key === "c") return row.c === null ? Infinity : row.c; // "new": from nothing, largest
    return row[key] === null || row[key] === undefined ? "" : row[key];
  }
  function compare(a, b) {
    var x = sortValue(a, state.key), y = sortValue(b, state.key);
    var r = typeof x === "string" ? (x < y ? -1 : x > y ? 1 : 0) : x - y;
    if (!state.asc) r = -r;
    return r || a.k - b.k;
  }
  function matches(row) {
    if (state.test !== null) return row.t === state.test;
    if (!state.text) return true;
    return row.t.toLowerCase().indexOf(state.text) >= 0 ||
      (row.o !== null && row.o.toLowerCase().indexOf(state.text) >= 0);
  }
  function tableRow(row) {
    var tr = el("tr", "row");
    tr.dataset.test = row.t;
    tr.appendChild(el("td", "num", row.k + 1));
    var id = el("td", "id");
    if (row.ch >= 0) {
      var a = el("a", null, row.t);
      a.href = "#chart-" + row.ch;
      a.title = "its chart";
      id.appendChild(a);
    } else {
      id.textContent = row.t;
    }
    tr.appendChild(id);
    tr.appendChild(el("td", null, row.f));
    tr.appendChild(el("td", "op", row.o === null ? "" : row.o));
    var up = row.c === null || row.c > 0;
    tr.appendChild(el("td", "num " + (up ? "up" : "down"), row.ct));
    tr.appendChild(el("td", "num opt", row.v));
    // Where the history cannot tell two commits apart: "3f2c1ab or the next commit".
    var commit = el("td", "mono", row.a || (row.s ? row.s.slice(0, 7) : "no commit"));
    commit.title = row.s + (DATA.machines.length > 1 ? " on machine " + row.m : "");
    tr.appendChild(commit);
    tr.appendChild(el("td", "opt date", row.d));
    return tr;
  }
  function renderTable() {
    var rows = ROWS.filter(matches).sort(compare);
    var n = Math.min(rows.length, state.limit), frag = document.createDocumentFragment();
    for (var i = 0; i < n; i++) frag.appendChild(tableRow(rows[i]));
    document.querySelector("#changes tbody").replaceChildren(frag);
    document.getElementById("shown-count").textContent =
      "showing " + n + " of " + rows.length + (rows.length !== ROWS.length ? " (filtered from " + ROWS.length + ")" : "");
    var more = document.getElementById("more");
    more.hidden = n >= rows.length;
    more.textContent = "show " + Math.min(PAGE, rows.length - n) + " more";
  }
  document.querySelectorAll("#changes th[data-key]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.dataset.key;
      // Changes and dates start largest (latest) first; the rest at the top of their order.
      if (state.key === key) state.asc = !state.asc;
      else { state.key = key; state.asc = key !== "c" && key !== "d"; }
      document.querySelectorAll("#changes th").forEach(function (h) { h.classList.remove("sorted", "asc"); });
      th.classList.add("sorted");
      if (state.asc) th.classList.add("asc");
      renderTable();
    });
  });
  var filter = document.getElementById("filter-text");
  filter.addEventListener("input", function () {
    state.text = filter.value.trim().toLowerCase(); state.test = null; state.limit = PAGE; renderTable();
  });
  document.getElementById("more").addEventListener("click", function () {
    state.limit += PAGE; renderTable();
  });

  // -- #test=<id>: where the HTML report's links land -----------------------------------------
  function target() {
    var hash = location.hash;
    if (hash.indexOf("#test=") !== 0) return;
    var id;
    try { id = decodeURIComponent(hash.slice(6)); } catch (e) { return; }
    var figs = [].slice.call(document.querySelectorAll(".chart")).filter(function (f) { return f.dataset.test === id; });
    document.querySelectorAll(".chart.target").forEach(function (f) { f.classList.remove("target"); });
    figs.forEach(function (f) { f.classList.add("target"); });
    state.test = id; state.limit = PAGE; filter.value = id;
    renderTable();
    var note = document.getElementById("target");
    var listed = ROWS.some(function (r) { return r.t === id; });
    note.hidden = figs.length > 0;
    note.textContent = id + (listed ? ": not among the charts drawn; its change points are in the table"
      : ": no change point in this history");
    (figs[0] || note).scrollIntoView();
  }
  window.addEventListener("hashchange", target);
  renderTable();
  target();
})();

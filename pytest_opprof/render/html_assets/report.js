// pytest-opprof HTML report: draws the table, the per-test panels and the flame views
// from the JSON embedded in #opprof-data.  Text goes in through textContent only, so a
// test id or op name can never become markup.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("opprof-data").textContent);
  var ROWS = DATA.rows;
  // Op names come once, in DATA.names; each op row holds an index into it.
  ROWS.forEach(function (row) {
    row.ops.forEach(function (op) { op[0] = DATA.names[op[0]]; });
    row.top = row.ops.length ? row.ops[0][0] : null;
  });
  var PAGE = 200;
  var CARDS = 20;
  var ROWS_SHOWN = 8;
  var ORDER = { regressed: 0, improved: 1, new: 2, pass: 3 };
  var state = { key: "st", asc: true, status: "", text: "", limit: PAGE };
  var tip = document.getElementById("tip");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  // Units as the terminal spells them (units.js, inlined before this script).
  var fmtTime = opprofUnits.fmtTime, fmtBytes = opprofUnits.fmtBytes;
  var fmtFlops = opprofUnits.fmtFlops, fmtValue = opprofUnits.fmtValue;
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function fmtChange(c) {
    if (c === null || c === undefined) return "";
    return (c >= 0 ? "+" : "") + (c * 100).toFixed(1) + "%";
  }
  // A wall-time change whose time was not judged (a busy machine) is shown muted, marked *.
  function changeCell(c, notJudged) {
    var td = el("td", "num", fmtChange(c) + (notJudged && c !== null && c !== undefined ? " *" : ""));
    if (notJudged) { td.classList.add("nj"); td.title = "time not judged: " + notJudged; }
    else if (c > 0) td.classList.add("up");
    else if (c < 0) td.classList.add("down");
    return td;
  }

  // -- the table -------------------------------------------------------------------
  function compare(a, b) {
    var k = state.key, x = a[k], y = b[k], r;
    if (k === "st") {
      r = ORDER[x] - ORDER[y];
      if (r === 0) r = Math.abs(b.wc || 0) - Math.abs(a.wc || 0);
      if (r === 0) r = a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      return state.asc ? r : -r;
    }
    var xm = x === null || x === undefined, ym = y === null || y === undefined;
    if (xm || ym) return xm && ym ? 0 : xm ? 1 : -1; // missing figures last either way
    if (typeof x === "string") r = x < y ? -1 : x > y ? 1 : 0;
    else r = x - y;
    if (!state.asc) r = -r;
    // Equal figures (stored times are rounded) fall back to the name, so the order is one order.
    return r || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  }
  function matches(row) {
    if (state.status && row.st !== state.status) return false;
    if (!state.text) return true;
    var t = state.text;
    if (row.id.toLowerCase().indexOf(t) >= 0) return true;
    for (var i = 0; i < row.ops.length; i++) {
      if (String(row.ops[i][0]).toLowerCase().indexOf(t) >= 0) return true;
    }
    return false;
  }
  // With a history (--opprof-history), each test links to its place on the history page.
  var HISTORY = DATA.history || null;
  function historyLink(id) {
    var n = HISTORY.changes[id] || 0;
    var a = el("a", "hist", n ? "history: " + plural(n, "change point") : "history");
    a.href = HISTORY.page + "#test=" + encodeURIComponent(id);
    a.addEventListener("click", function (e) { e.stopPropagation(); }); // not the row's panel
    return a;
  }
  // A test that only its creep against the history, or only its budgets, failed reads
  // "crept" or "over budget" (its status is "regressed": it filters and sorts with them).
  function label(row) { return row.lb || row.st; }
  function tableRow(row) {
    var tr = el("tr", "row st-" + row.st);
    tr.dataset.id = row.id;
    var badge = el("td", "badge st-" + row.st, label(row) + (row.mk ? " ★" : ""));
    if (row.mk) badge.title = "★ carries a profile marker";
    tr.appendChild(badge);
    var idCell = el("td", "id", row.id);
    if (HISTORY) { idCell.appendChild(document.createTextNode(" ")); idCell.appendChild(historyLink(row.id)); }
    tr.appendChild(idCell);
    tr.appendChild(el("td", "num opt", fmtTime(row.w)));
    tr.appendChild(el("td", "num opt", fmtTime(row.wb)));
    tr.appendChild(changeCell(row.wc, row.tn || (row.nj ? "see the test's notes" : null)));
    tr.appendChild(el("td", "num opt", fmtFlops(row.f)));
    tr.appendChild(el("td", "num opt", fmtBytes(row.m)));
    tr.appendChild(el("td", "num opt", fmtValue(row.sh, "share")));
    tr.appendChild(el("td", "opt mono", row.top || "-"));
    return tr;
  }
  var BYID = {};
  ROWS.forEach(function (r) { BYID[r.id] = r; });
  function renderTable() {
    var rows = ROWS.filter(matches).sort(compare);
    var body = document.querySelector("#tests tbody");
    var frag = document.createDocumentFragment();
    var n = Math.min(rows.length, state.limit);
    for (var i = 0; i < n; i++) frag.appendChild(tableRow(rows[i]));
    body.replaceChildren(frag);
    document.getElementById("shown-count").textContent =
      "showing " + n + " of " + rows.length + (rows.length !== ROWS.length ? " (filtered from " + ROWS.length + ")" : "");
    var more = document.getElementById("more");
    more.hidden = n >= rows.length;
    more.textContent = "show " + Math.min(PAGE, rows.length - n) + " more";
  }
  document.querySelectorAll("#tests th").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.dataset.key;
      // Figures start largest first; names and status start at the top of their order.
      if (state.key === key) state.asc = !state.asc;
      else { state.key = key; state.asc = key === "st" || key === "id" || key === "top"; }
      document.querySelectorAll("#tests th").forEach(function (h) { h.classList.remove("sorted", "asc"); });
      th.classList.add("sorted");
      if (state.asc) th.classList.add("asc");
      renderTable();
    });
  });
  document.getElementById("filter-status").addEventListener("change", function (e) {
    state.status = e.target.value; state.limit = PAGE; renderTable();
  });
  document.getElementById("filter-text").addEventListener("input", function (e) {
    state.text = e.target.value.trim().toLowerCase(); state.limit = PAGE; renderTable();
  });
  document.getElementById("more").addEventListener("click", function () {
    state.limit += PAGE; renderTable();
  });
  document.querySelector("#tests tbody").addEventListener("click", function (e) {
    var tr = e.target.closest("tr.row");
    if (!tr) return;
    var next = tr.nextElementSibling;
    if (next && next.classList.contains("detail-row")) { next.remove(); return; }
    var detailRow = el("tr", "detail-row");
    var td = el("td", "detail-cell");
    td.colSpan = 9;
    td.appendChild(panel(BYID[tr.dataset.id], false));
    detailRow.appendChild(td);
    tr.after(detailRow);
  });

  // -- one test's panel ------------------------------------------------------------
  function simpleTable(cls, headers, rows, optional) {
    var table = el("table", cls), tr = el("tr");
    headers.forEach(function (h, i) {
      tr.appendChild(el("th", (optional.indexOf(i) >= 0 ? "opt " : "") + (i > 1 ? "num" : ""), h));
    });
    var thead = el("thead"); thead.appendChild(tr); table.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (cells) {
      var r = el("tr");
      cells.forEach(function (c, i) {
        var td = c instanceof Node ? c : el("td", i === 0 ? "op" : i > 1 ? "num" : "", c);
        if (optional.indexOf(i) >= 0) td.classList.add("opt");
        r.appendChild(td);
      });
      body.appendChild(r);
    });
    table.appendChild(body);
    var wrap = el("div", "table-wrap"); wrap.appendChild(table);
    return wrap;
  }
  // The first ROWS_SHOWN rows of a table, and a button that shows them all.
  function shortened(items, make, what) {
    var wrap = el("div"), table = make(items.slice(0, ROWS_SHOWN));
    wrap.appendChild(table);
    if (items.length > ROWS_SHOWN) {
      var all = el("button", "show-all", "show all " + items.length + " " + what);
      all.type = "button";
      all.addEventListener("click", function () { table.replaceWith(make(items)); all.remove(); });
      wrap.appendChild(all);
    }
    return wrap;
  }
  function bars(metrics) {
    var box = el("div", "bars");
    metrics.forEach(function (m) {
      var name = m[0], unit = m[1], base = m[2], now = m[3], change = m[4], status = m[6];
      if (base === null || now === null) return;
      var top = Math.max(Math.abs(base), Math.abs(now)) || 1;
      box.appendChild(el("div", "label", name));
      var cell = el("div");
      var b = el("div", "bar base"); b.style.width = (Math.abs(base) / top * 100) + "%";
      b.title = "baseline " + fmtValue(base, unit);
      var n = el("div", "bar now " + status); n.style.width = (Math.abs(now) / top * 100) + "%";
      n.title = "now " + fmtValue(now, unit);
      cell.appendChild(b); cell.appendChild(n); box.appendChild(cell);
      var fig = el("div", "fig", fmtValue(base, unit) + " → " + fmtValue(now, unit) + " " + fmtChange(change));
      if (status === "regressed") fig.classList.add("up");
      if (status === "improved") fig.classList.add("down");
      box.appendChild(fig);
    });
    return box;
  }
  function panel(row, card) {
    var box = el("div", card ? "card st-" + row.st : "detail");
    box.dataset.id = row.id;
    if (card) {
      var h = el("h3");
      h.appendChild(el("span", "badge st-" + row.st, label(row).toUpperCase() + " "));
      h.appendChild(el("span", "mono", row.id));
      box.appendChild(h);
    }
    if (HISTORY) { var p = el("p", "note"); p.appendChild(historyLink(row.id)); box.appendChild(p); }
    var d = row.d;
    if (row.tn) box.appendChild(el("p", "contention", "time not judged: " + row.tn));
    (row.cr || []).forEach(function (text) {
      box.appendChild(el("p", "crept", "crept beyond tolerance against its history: " + text));
    });
    // Each absolute budget: [status, the terminal's sentence, naming the ops that used it].
    (row.bu || []).forEach(function (b) {
      var over = b[0] === "over";
      box.appendChild(el("p", "budget " + (over ? "over" : "note"), (over ? "over budget: " : "budget: ") + b[1]));
    });
    if (d) {
      box.appendChild(el("p", "note", (d.rounds ? plural(d.rounds, "round") : "? rounds") +
        (d.baseline_at ? "; baseline recorded " + d.baseline_at : "; no baseline")));
      if (d.metrics.length) { box.appendChild(el("h4", null, "figures: baseline vs now")); box.appendChild(bars(d.metrics)); }
      if (d.reasons.length) {
        box.appendChild(el("h4", null, "op-level reasons, by impact"));
        var reasonsTable = function (reasons) {
          return simpleTable("reasons", ["op", "change", "baseline", "now", "Δ", "status"],
            reasons.map(function (r) {
              return [r[0], r[1], fmtValue(r[3], r[2]), fmtValue(r[4], r[2]), fmtChange(r[5]), r[6]];
            }), [2, 3]);
        };
        box.appendChild(shortened(d.reasons, reasonsTable, "op changes"));
        if (d.more_reasons) box.appendChild(el("p", "note", "… " + d.more_reasons + " more op changes in the JSON report"));
      }
      d.notes.forEach(function (note) { box.appendChild(el("p", "note", "note: " + note)); });
    } else {
      box.appendChild(el("p", "note", "Only the top ops of this test are embedded; the JSON report has its full figures."));
    }
    if (row.ops.length) {
      box.appendChild(el("h4", null, "ops (median over rounds), by self time"));
      var opsTable = function (ops) {
        return simpleTable("ops", ["op", "calls", "self CPU", "CPU total", "self memory", "FLOPs"],
          ops.map(function (o) {
            return [o[0], fmtValue(o[1], "ops"), fmtTime(o[2]), fmtTime(o[3]), fmtBytes(o[4]), o[5] ? fmtFlops(o[5]) : ""];
          }), [3, 4]);
      };
      box.appendChild(shortened(row.ops, opsTable, "ops"));
    }
    if (d && d.flame) {
      box.appendChild(el("h4", null, "flame view of the median round"));
      box.appendChild(flame(d.flame));
    } else if (d) {
      box.appendChild(el("p", "note", "No flame view: kept for tests that regressed, improved or carry a marker."));
    }
    return box;
  }

  // -- flame (icicle) view -----------------------------------------------------------
  var ROW_PX = 18;
  function flame(fl) {
    var wrap = el("div", "flame-wrap");
    var legend = el("div", "legend note");
    legend.appendChild(document.createTextNode("width = time;"));
    var s = el("span"); s.style.background = "var(--scope)"; legend.appendChild(s);
    legend.appendChild(document.createTextNode("scope (record_function)"));
    var o = el("span"); o.style.background = "var(--op)"; legend.appendChild(o);
    legend.appendChild(document.createTextNode("op"));
    wrap.appendChild(legend);
    var box = el("div", "flame");
    var nodes = fl.nodes, names = fl.names, n = nodes.length;
    var sumTop = 0, i;
    for (i = 0; i < n; i++) if (nodes[i][0] < 0) sumTop += nodes[i][3];
    var width = Math.max(fl.wall_ns, sumTop, 1);
    var x = new Array(n), depth = new Array(n), cursor = new Array(n), rootCursor = 0, maxDepth = 0, hidden = 0;
    function add(cls, left, w, d, label, info) {
      var b = el("div", "fl-box " + cls, label);
      b.style.left = (left / width * 100) + "%";
      b.style.width = (w / width * 100) + "%";
      b.style.top = (d * ROW_PX) + "px";
      b.dataset.info = info;
      b.setAttribute("aria-label", info);
      box.appendChild(b);
    }
    add("fl-root", 0, width, 0, "test", "test round: " + fmtTime(fl.wall_ns) + " wall time");
    for (i = 0; i < n; i++) {
      var nd = nodes[i], p = nd[0];
      if (p < 0) { x[i] = rootCursor; rootCursor += nd[3]; depth[i] = 1; }
      else { x[i] = cursor[p]; cursor[p] += nd[3]; depth[i] = depth[p] + 1; }
      cursor[i] = x[i];
      if (nd[3] / width < 0.0005) { hidden++; continue; } // under a pixel at any width
      if (depth[i] > maxDepth) maxDepth = depth[i];
      var name = names[nd[1]];
      var info = name + ": total " + fmtTime(nd[3]) + " (" + (nd[3] / width * 100).toFixed(1) +
        "% of the round), self " + fmtTime(nd[4]) + ", " + nd[5].toLocaleString("en-US") +
        (nd[5] === 1 ? " call" : " calls");
      add(nd[2] === 0 ? "fl-scope" : "fl-op", x[i], nd[3], depth[i], name, info);
    }
    box.style.height = ((maxDepth + 1) * ROW_PX + 2) + "px";
    var line = el("div", "flame-info", "hover a box for its figures");
    box.addEventListener("mouseover", function (e) {
      var b = e.target.closest(".fl-box");
      if (!b) return;
      line.textContent = b.dataset.info;
      tip.textContent = b.dataset.info;
      tip.hidden = false;
    });
    box.addEventListener("mousemove", function (e) {
      tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 430) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
    box.addEventListener("mouseleave", function () { tip.hidden = true; });
    wrap.appendChild(box);
    wrap.appendChild(line);
    var left = hidden + (fl.omitted || 0);
    if (left) wrap.appendChild(el("p", "note", left + " smaller node(s) not drawn"));
    return wrap;
  }

  // -- what needs attention, regressions first --------------------------------------
  var attention = document.getElementById("attention");
  var changed = ROWS.filter(function (r) { return r.st === "regressed" || r.st === "improved"; });
  changed.sort(function (a, b) { return ORDER[a.st] - ORDER[b.st] || Math.abs(b.wc || 0) - Math.abs(a.wc || 0); });
  attention.appendChild(el("h2", null, changed.length ? "Needs attention" : "Nothing regressed or improved"));
  changed.slice(0, CARDS).forEach(function (r) { attention.appendChild(panel(r, true)); });
  if (changed.length > CARDS) {
    attention.appendChild(el("p", "note", (changed.length - CARDS) + " more changed tests: filter the table below by status"));
  }
  renderTable();
})();

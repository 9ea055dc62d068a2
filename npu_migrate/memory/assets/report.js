// npu-migrate memory report viewer: plain canvas drawing over pre-aggregated data.
"use strict";
(function () {
  var statusEl = document.getElementById("status");
  window.onerror = function (message) {
    document.body.setAttribute("data-error", String(message));
    statusEl.textContent = "script error: " + message;
    statusEl.className = "status error";
  };

  var DATA = JSON.parse(document.getElementById("data").textContent);
  var dev = null;          // current device payload
  var view = { x0: 0, x1: 1 };  // visible event range
  var selected = null;     // selected block row
  var marker = null;       // event highlighted by a finding
  var drawnBlocks = [];    // [x, y, w, h, block] hit boxes of the lifetime chart
  var poolBoxes = [];      // hit boxes of the pool view
  var highlight = null;    // {finding index: block id set} of the clicked finding
  var tab = "blocks";      // the table shown
  var tableRows = [];      // rows currently listed: {kind, id, cells, block?, event?}
  var tableSel = -1;       // index of the selected row in tableRows
  var findingItems = [];   // [li, finding] of the current device
  var findingSel = -1;
  var MAX_ROWS = 300;      // rows listed at once (the count says how many match)
  var STATES = ["active_allocated", "active_pending_free", "freed"];

  function bytes(v) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, s = v < 0 ? "-" : "";
    v = Math.abs(v);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return s + (i ? v.toFixed(2) : v.toFixed(0)) + " " + units[i];
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function setupCanvas(canvas) {
    var ratio = window.devicePixelRatio || 1;
    var width = canvas.clientWidth || 1000, height = canvas.height / (canvas._ratio || 1);
    canvas._ratio = ratio;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    return { ctx: ctx, w: width, h: height };
  }

  function lowerBound(arr, value) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function eventLabel(e) {
    var s = dev.series, text = "event " + e;
    if (s.t && s.x.length) {
      var i = Math.max(0, lowerBound(s.x, e + 1) - 1);
      text += " (+" + s.t[i].toFixed(3) + " s)";
    }
    return text;
  }

  // ---- timeline -------------------------------------------------------------------------
  var PAD_L = 70, PAD_B = 18;
  function xToPx(x, w) { return PAD_L + (x - view.x0) / (view.x1 - view.x0) * (w - PAD_L - 8); }
  function pxToX(px, w) { return view.x0 + (px - PAD_L) / (w - PAD_L - 8) * (view.x1 - view.x0); }

  function drawTimeline() {
    var c = setupCanvas(document.getElementById("timeline")), g = c.ctx, s = dev.series;
    g.clearRect(0, 0, c.w, c.h);
    if (!s.x.length) { g.fillText("no events recorded on this device", PAD_L, 40); return 0; }
    var lo = Math.max(0, lowerBound(s.x, view.x0) - 1), hi = Math.min(s.x.length, lowerBound(s.x, view.x1) + 1);
    var top = 1;
    for (var i = lo; i < hi; i++) top = Math.max(top, s.rmax[i], s.amax[i], s.act[i]);
    var plotH = c.h - PAD_B - 6;
    function y(v) { return 6 + plotH - v / top * plotH; }
    g.strokeStyle = "#e3e6eb"; g.fillStyle = "#667"; g.font = "11px sans-serif";
    for (var k = 0; k <= 4; k++) {
      var yy = y(top * k / 4);
      g.beginPath(); g.moveTo(PAD_L, yy); g.lineTo(c.w - 8, yy); g.stroke();
      g.fillText(bytes(top * k / 4), 4, yy + 4);
    }
    // steps and finding marks
    g.strokeStyle = "rgba(80,160,80,0.35)";
    var visibleSteps = (dev.steps || []).filter(function (st) { return st >= view.x0 && st <= view.x1; });
    if (visibleSteps.length * 4 < c.w) visibleSteps.forEach(function (st) {
      if (st < view.x0 || st > view.x1) return;
      var px = xToPx(st, c.w); g.beginPath(); g.moveTo(px, 6); g.lineTo(px, 6 + plotH); g.stroke();
    });
    function band(maxKey, minKey, fill) {
      g.beginPath();
      for (var i = lo; i < hi; i++) g.lineTo(xToPx(s.x[i], c.w), y(s[maxKey][i]));
      for (var j = hi - 1; j >= lo; j--) g.lineTo(xToPx(s.x[j], c.w), y(s[minKey][j]));
      g.closePath(); g.fillStyle = fill; g.fill();
    }
    band("rmax", "rmin", "rgba(150,155,165,0.35)");
    function line(key, color, width) {
      g.beginPath(); g.strokeStyle = color; g.lineWidth = width;
      for (var i = lo; i < hi; i++) {
        var px = xToPx(s.x[i], c.w);
        if (i === lo) g.moveTo(px, y(s[key][i])); else g.lineTo(px, y(s[key][i]));
      }
      g.stroke(); g.lineWidth = 1;
    }
    line("rmax", "#7a808c", 1);
    line("act", "#f08c28", 1);
    band("amax", "amin", "rgba(40,100,220,0.25)");
    line("amax", "#2864dc", 1.5);
    (dev.marks || []).forEach(function (m) {
      if (m.event < view.x0 || m.event > view.x1) return;
      var px = xToPx(m.event, c.w);
      g.fillStyle = m.severity === "error" ? "#c01818" : m.severity === "warning" ? "#d08a00" : "#6a4cc0";
      g.beginPath(); g.moveTo(px - 5, 0); g.lineTo(px + 5, 0); g.lineTo(px, 9); g.fill();
    });
    if (marker !== null) {
      var mx = xToPx(marker, c.w);
      g.strokeStyle = "#c01818"; g.setLineDash([4, 3]);
      g.beginPath(); g.moveTo(mx, 0); g.lineTo(mx, 6 + plotH); g.stroke(); g.setLineDash([]);
    }
    g.fillStyle = "#667";
    g.fillText(eventLabel(Math.round(view.x0)), PAD_L, c.h - 4);
    var right = eventLabel(Math.round(view.x1));
    g.fillText(right, c.w - 8 - g.measureText(right).width, c.h - 4);
    document.getElementById("range").textContent =
      "events " + Math.round(view.x0) + "-" + Math.round(view.x1) + " of " + dev.events;
    return hi - lo;
  }

  // ---- block lifetimes -------------------------------------------------------------------
  function drawLifetime() {
    var c = setupCanvas(document.getElementById("lifetime")), g = c.ctx, rows = dev.blocks.rows;
    g.clearRect(0, 0, c.w, c.h);
    drawnBlocks = [];
    var space = Math.max(dev.blocks.space, 1), plotH = c.h - 8;
    for (var i = 0; i < rows.length; i++) {
      var b = rows[i];
      if (b[2] < view.x0 || b[1] > view.x1) continue;
      var x0 = Math.max(xToPx(b[1], c.w), PAD_L), x1 = Math.min(xToPx(b[2], c.w), c.w - 8);
      var y0 = 4 + b[3] / space * plotH, h = Math.max(b[4] / space * plotH, 1);
      var hue = (b[7] * 47) % 360;
      g.fillStyle = b === selected ? "#111" : "hsla(" + hue + ",60%,50%,0.75)";
      g.fillRect(x0, y0, Math.max(x1 - x0, 1), h);
      if (highlight && highlight.ids.has(b[0])) {
        g.strokeStyle = "#d23c3c"; g.lineWidth = 2;
        g.strokeRect(x0 - 1, y0 - 1, Math.max(x1 - x0, 1) + 2, h + 2); g.lineWidth = 1;
      }
      drawnBlocks.push([x0, y0, Math.max(x1 - x0, 1), Math.max(h, 3), b]);
    }
    g.fillStyle = "#667"; g.font = "11px sans-serif";
    g.fillText("address", 4, 14); g.fillText("space", 4, 26); g.fillText(bytes(space), 4, 38);
    document.getElementById("lifetime-note").textContent = rows.length + " largest of " +
      dev.blocks.total + " blocks drawn (by size x lifetime); " + drawnBlocks.length + " in view";
    return drawnBlocks.length;
  }

  // ---- pool state ------------------------------------------------------------------------
  function drawPool() {
    var c = setupCanvas(document.getElementById("pool")), g = c.ctx;
    g.clearRect(0, 0, c.w, c.h);
    poolBoxes = [];
    var idx = +document.getElementById("moment").value, pool = dev.pools[idx];
    if (!pool) { g.fillText("no pool moments", 10, 20); return 0; }
    document.getElementById("moment-label").textContent = eventLabel(pool.event) + ": reserved " +
      bytes(pool.reserved) + ", free " + bytes(pool.free) + ", largest free block " + bytes(pool.largest) +
      (pool.more_segments ? " (" + pool.more_segments + " smaller segments not drawn)" : "");
    var segs = pool.segments, rowH = Math.max(Math.min(18, (c.h - 4) / Math.max(segs.length, 1)), 3);
    var biggest = 1;
    segs.forEach(function (s) { biggest = Math.max(biggest, s.size); });
    var width = c.w - 150;
    segs.forEach(function (s, i) {
      var y0 = 2 + i * rowH, w = Math.max(s.size / biggest * width, 2);
      g.fillStyle = "#d9dce2"; g.fillRect(140, y0, w, rowH - 1);
      s.blocks.forEach(function (b) {
        var bx = 140 + b[0] / s.size * w, bw = Math.max(b[1] / s.size * w, 0.5);
        g.fillStyle = b[2] ? "#d23c3c" : "#2864dc";
        g.fillRect(bx, y0, bw, rowH - 1);
        poolBoxes.push([bx, y0, Math.max(bw, 2), rowH, b, s]);
      });
      if (rowH >= 9) {
        g.fillStyle = "#445"; g.font = "10px sans-serif";
        g.fillText(s.addr.slice(-9) + " " + bytes(s.size), 2, y0 + rowH - 3);
      }
    });
    return poolBoxes.length;
  }

  function showBlock(row, extra) {
    var st = dev.stacks[String(row.stack)];
    var lines = ["block " + row.id + (extra || ""), "address " + row.addr, "size " + bytes(row.size) +
      " (requested " + bytes(row.requested) + ")"];
    if (row.alloc !== -2) {
      lines.push("alloc event " + (row.alloc < 0 ? "before the window" : row.alloc));
      lines.push("free event " + (row.free < 0 ? "not freed in the window" : row.free));
    }
    lines.push("site " + (st ? st.site : "<no stack recorded>"), "");
    if (st) lines = lines.concat(st.frames);
    document.getElementById("details").textContent = lines.join("\n");
  }


  // ---- tables: Block view, Event view, top sites, leaked and wasteful blocks ---------------
  var UNITS = { "": 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1048576, mb: 1048576, mib: 1048576,
                g: 1073741824, gb: 1073741824, gib: 1073741824 };
  function parseSize(text) {
    var m = /^\s*([0-9.]+)\s*([a-zA-Z]*)\s*$/.exec(text || "");
    if (!m || !(m[2].toLowerCase() in UNITS)) return null;
    return parseFloat(m[1]) * UNITS[m[2].toLowerCase()];
  }
  function filters() {
    return { text: document.getElementById("search").value.trim().toLowerCase(),
             min: parseSize(document.getElementById("min-size").value),
             max: parseSize(document.getElementById("max-size").value),
             state: document.getElementById("state-filter").value,
             range: document.getElementById("in-range").checked };
  }
  function findingBlocks(code) {
    var ids = new Set();
    DATA.findings.forEach(function (f) {
      if (f.code === code && f.device === dev.device) f.blocks.forEach(function (b) { ids.add(b); });
    });
    return ids;
  }
  function blockRows(f, only) {
    var t = dev.tables, b = t.blocks, out = [], msm = !!b.owner;
    for (var i = 0; i < b.id.length; i++) {
      var id = b.id[i];
      if (only && !only.has(id)) continue;
      if (highlight && tab === "blocks" && !highlight.ids.has(id)) continue;
      if (f.min !== null && b.size[i] < f.min) continue;
      if (f.max !== null && b.size[i] > f.max) continue;
      if (f.state !== "" && b.state[i] !== +f.state) continue;
      var end = b.free[i] < 0 ? dev.events : b.free[i];
      if (f.range && (end < view.x0 || b.alloc[i] > view.x1)) continue;
      var site = t.sites[b.site[i]];
      if (f.text && b.addr[i].indexOf(f.text) < 0 && site.toLowerCase().indexOf(f.text) < 0 &&
          !(msm && b.owner[i].toLowerCase().indexOf(f.text) >= 0)) continue;
      var cells = [id, bytes(b.requested[i]), bytes(b.size[i]), b.addr[i], STATES[b.state[i]],
                   b.alloc[i] < 0 ? "before" : b.alloc[i], b.free[i] < 0 ? "-" : b.free[i], site];
      if (msm) cells.push(b.owner[i], b.first_access[i] === null ? "-" : b.first_access[i],
                          b.last_access[i] === null ? "-" : b.last_access[i]);
      out.push({ kind: "block", id: id, cells: cells, index: i,
                 hl: !!(highlight && highlight.ids.has(id)) });
    }
    return out;
  }
  function eventRows(f) {
    var t = dev.tables, e = t.events, out = [];
    for (var i = 0; i < e.id.length; i++) {
      if (f.min !== null && e.size[i] < f.min) continue;
      if (f.max !== null && e.size[i] > f.max) continue;
      if (f.range && (e.id[i] < view.x0 || e.id[i] > view.x1)) continue;
      var site = e.site[i] >= 0 ? t.sites[e.site[i]] : "";
      if (f.text && e.addr[i].indexOf(f.text) < 0 && site.toLowerCase().indexOf(f.text) < 0) continue;
      out.push({ kind: "event", id: e.id[i], cells: [e.id[i], t.actions[e.action[i]], e.addr[i],
                 bytes(e.size[i]), bytes(e.allocated[i]), bytes(e.reserved[i]), site] });
    }
    return out;
  }
  var HEADERS = {
    blocks: ["id", "requested size", "size", "address", "state", "alloc event", "free event", "site"],
    events: ["id", "action", "address", "size", "allocated", "reserved", "site"],
    sites: ["site", "blocks", "bytes allocated", "live at the peak"]
  };
  function renderTable() {
    var f = filters(), t = dev.tables, rows, note;
    if (tab === "sites") {
      rows = t.top_sites.filter(function (r) { return !f.text || r[0].toLowerCase().indexOf(f.text) >= 0; })
        .map(function (r) { return { kind: "site", id: r[0], cells: [r[0], r[1], bytes(r[2]), bytes(r[3])] }; });
      note = "top " + t.top_sites.length + " allocation sites over all " + t.blocks_total + " blocks";
    } else if (tab === "events") {
      rows = eventRows(f);
      note = t.events.id.length + " of " + t.events_total + " events embedded (those of the listed blocks and around the peak and findings; `npu-migrate memory events` lists any range)";
    } else {
      var only = tab === "leaked" ? findingBlocks("MEM001") : tab === "wasteful" ? findingBlocks("MEM005") : null;
      rows = blockRows(f, only);
      note = (only ? only.size + " blocks named by " + (tab === "leaked" ? "MEM001" : "MEM005") + " findings; " : "") +
        t.blocks.id.length + " of " + t.blocks_total + " blocks embedded (findings', the peak's, the longest-lived)";
      if (highlight && tab === "blocks") note = "blocks of the clicked finding; " + note;
    }
    var head = (HEADERS[tab] || HEADERS.blocks).slice();
    if (tab !== "events" && tab !== "sites" && t.blocks.owner) head.push("owner", "first access (us)", "last access (us)");
    var thead = document.querySelector("#table thead"), tbody = document.querySelector("#table tbody");
    thead.textContent = ""; tbody.textContent = "";
    var tr = el("tr"); head.forEach(function (h) { tr.appendChild(el("th", h)); }); thead.appendChild(tr);
    tableRows = rows.slice(0, MAX_ROWS);
    tableRows.forEach(function (r, k) {
      var row = el("tr", undefined, (r.hl ? "hl" : "") + (k === tableSel ? " sel" : ""));
      r.cells.forEach(function (c) { row.appendChild(el("td", String(c))); });
      row.addEventListener("click", function () { selectRow(k, true); });
      tbody.appendChild(row);
    });
    if (tableSel >= tableRows.length) tableSel = tableRows.length - 1;
    document.getElementById("table-note").textContent = rows.length + " match" +
      (rows.length > MAX_ROWS ? " (first " + MAX_ROWS + " listed)" : "") + "; " + note;
    document.body.setAttribute("data-table", tab);
    document.body.setAttribute("data-table-rows", String(tableRows.length));
    document.body.setAttribute("data-table-matches", String(rows.length));
    document.body.setAttribute("data-table-first", tableRows.length ? String(tableRows[0].id) : "");
    return tableRows.length;
  }
  function selectRow(k, open) {
    if (!tableRows.length) return;
    tableSel = Math.max(0, Math.min(tableRows.length - 1, k));
    var trs = document.querySelectorAll("#table tbody tr");
    for (var i = 0; i < trs.length; i++) trs[i].className = (tableRows[i].hl ? "hl" : "") + (i === tableSel ? " sel" : "");
    if (trs[tableSel] && trs[tableSel].scrollIntoView) trs[tableSel].scrollIntoView({ block: "nearest" });
    var r = tableRows[tableSel];
    document.body.setAttribute("data-selected-row", String(r.id));
    if (!open) return;
    if (r.kind === "block") {
      var b = dev.tables.blocks, i = r.index;
      showBlockRow(i);
      if (b.alloc[i] >= 0) { marker = b.alloc[i]; drawTimeline(); }
    } else if (r.kind === "event") {
      marker = r.id; drawTimeline();
      document.getElementById("details").textContent = HEADERS.events.map(function (h, j) { return h + " " + r.cells[j]; }).join("\n");
    } else {
      document.getElementById("search").value = r.id; switchTab("blocks");
    }
  }
  function showBlockRow(i) {
    var b = dev.tables.blocks, site = dev.tables.sites[b.site[i]];
    var lines = ["block " + b.id[i], "address " + b.addr[i], "size " + bytes(b.size[i]) + " (requested " +
      bytes(b.requested[i]) + ")", "state " + STATES[b.state[i]],
      "alloc event " + (b.alloc[i] < 0 ? "before the window" : b.alloc[i]),
      "free event " + (b.free[i] < 0 ? "not freed in the window" : b.free[i]), "site " + site];
    if (b.owner) lines.push("owner " + b.owner[i]);
    document.getElementById("details").textContent = lines.join("\n");
  }
  function switchTab(name) {
    tab = name; tableSel = -1;
    var buttons = document.querySelectorAll(".tabs button");
    for (var i = 0; i < buttons.length; i++) buttons[i].className = buttons[i].getAttribute("data-tab") === name ? "on" : "";
    renderTable();
  }
  function chooseFinding(k) {
    if (!findingItems.length) return;
    findingSel = (k + findingItems.length) % findingItems.length;
    var item = findingItems[findingSel];
    findingItems.forEach(function (p, j) { p[0].classList.toggle("on", j === findingSel); });
    var f = item[1];
    highlight = f.blocks.length ? { finding: findingSel, ids: new Set(f.blocks) } : null;
    document.getElementById("clear-highlight").hidden = !highlight;
    document.body.setAttribute("data-highlighted", String(highlight ? highlight.ids.size : 0));
    if (highlight) { document.getElementById("in-range").checked = false; tab = "blocks"; }
    if (f.event !== null && f.event >= 0) focusEvent(f.event); else redraw();
    if (highlight) switchTab("blocks");
  }
  function clearHighlight() {
    highlight = null; findingSel = -1;
    findingItems.forEach(function (p) { p[0].classList.remove("on"); });
    document.getElementById("clear-highlight").hidden = true;
    document.body.setAttribute("data-highlighted", "0");
    redraw();
  }
  function onKey(ev) {
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test((ev.target && ev.target.tagName) || "");
    if (ev.key === "Escape") { if (typing) ev.target.blur(); clearHighlight(); return; }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "/") { ev.preventDefault(); document.getElementById("search").focus(); }
    else if (k === "j" || k === "ArrowDown") { ev.preventDefault(); selectRow(tableSel + 1, false); }
    else if (k === "k" || k === "ArrowUp") { ev.preventDefault(); selectRow(tableSel - 1, false); }
    else if (k === "Enter") selectRow(Math.max(tableSel, 0), true);
    else if (k === "n") chooseFinding(findingSel + 1);
    else if (k === "p") chooseFinding(findingSel - 1);
    else if (k === "+" || k === "=") zoom(0.5);
    else if (k === "-") zoom(2);
    else if (k === "0") { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); }
    else if (k >= "1" && k <= "5") switchTab(["blocks", "events", "sites", "leaked", "wasteful"][+k - 1]);
  }

  // ---- wiring ----------------------------------------------------------------------------
  function redraw() { drawTimeline(); drawLifetime(); if (document.getElementById("in-range").checked || highlight) renderTable(); }

  function zoom(factor, centre) {
    var span = (view.x1 - view.x0) * factor, min = 10, full = Math.max(dev.events, 1);
    span = Math.max(Math.min(span, full), Math.min(min, full));
    var c = centre === undefined ? (view.x0 + view.x1) / 2 : centre;
    var frac = (c - view.x0) / (view.x1 - view.x0);
    view.x0 = c - span * frac; view.x1 = view.x0 + span;
    clampView(); redraw();
  }
  function clampView() {
    var full = Math.max(dev.events, 1), span = view.x1 - view.x0;
    if (view.x0 < 0) { view.x0 = 0; view.x1 = span; }
    if (view.x1 > full) { view.x1 = full; view.x0 = Math.max(0, full - span); }
  }
  function focusEvent(e) {
    marker = e;
    var span = Math.max(Math.min((view.x1 - view.x0), dev.events / 4), 20);
    view.x0 = e - span / 2; view.x1 = e + span / 2; clampView();
    chooseMoment(e); redraw();
  }
  function chooseMoment(e) {
    var best = 0;
    dev.pools.forEach(function (p, i) {
      if (Math.abs(p.event - e) < Math.abs(dev.pools[best].event - e)) best = i;
    });
    document.getElementById("moment").value = best; drawPool();
  }

  function bindCanvas(canvas, onClick) {
    var drag = null;
    canvas.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var rect = canvas.getBoundingClientRect();
      zoom(ev.deltaY < 0 ? 0.8 : 1.25, pxToX(ev.clientX - rect.left, rect.width));
    }, { passive: false });
    canvas.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, x0: view.x0, x1: view.x1, moved: false }; });
    window.addEventListener("mouseup", function (ev) {
      if (drag && !drag.moved && ev.target === canvas) {
        var rect = canvas.getBoundingClientRect();
        onClick(ev.clientX - rect.left, ev.clientY - rect.top, rect.width);
      }
      drag = null;
    });
    canvas.addEventListener("mousemove", function (ev) {
      var rect = canvas.getBoundingClientRect();
      if (drag) {
        var dx = (ev.clientX - drag.x) / (rect.width - PAD_L - 8) * (drag.x1 - drag.x0);
        if (Math.abs(ev.clientX - drag.x) > 3) drag.moved = true;
        view.x0 = drag.x0 - dx; view.x1 = drag.x1 - dx; clampView(); redraw();
      } else if (canvas.id === "timeline") {
        hover(pxToX(ev.clientX - rect.left, rect.width));
      }
    });
    canvas.addEventListener("dblclick", function () { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); });
  }

  function hover(x) {
    var s = dev.series;
    if (!s.x.length) return;
    var i = Math.max(0, Math.min(s.x.length - 1, lowerBound(s.x, x + 1) - 1));
    document.getElementById("hover").textContent = eventLabel(s.x[i]) + ": allocated " + bytes(s.amax[i]) +
      ", active " + bytes(s.act[i]) + ", reserved " + bytes(s.rmax[i]) +
      (s.x.length < dev.events ? " (max over events " + s.x[i] + "-" + ((s.x[i + 1] || dev.events) - 1) + ")" : "");
  }

  function blockFromRow(b) {
    return { id: b[0], size: b[4], requested: b[5], stack: b[7], addr: b[8], alloc: b[9], free: b[10] };
  }

  function selectDevice(i) {
    dev = DATA.devices[i];
    view.x0 = 0; view.x1 = Math.max(dev.events, 1); marker = null; selected = null;
    var slider = document.getElementById("moment");
    slider.max = Math.max(dev.pools.length - 1, 0);
    var peakMoment = 0;
    dev.pools.forEach(function (p, k) { if (p.event === dev.peak.event) peakMoment = k; });
    slider.value = peakMoment;
    var summary = document.getElementById("summary");
    summary.textContent = "";
    summary.appendChild(el("span", "device " + dev.device));
    summary.appendChild(el("span", dev.events + " events"));
    summary.appendChild(el("span", "peak allocated " + bytes(dev.peak.bytes) + " at " + eventLabel(dev.peak.event)));
    summary.appendChild(el("span", dev.step_count + " steps (" + dev.step_source + ")"));
    var list = document.getElementById("findings");
    list.textContent = "";
    findingItems = []; findingSel = -1; highlight = null; tableSel = -1;
    DATA.findings.forEach(function (f) {
      if (f.device !== null && f.device !== dev.device) return;  // another device's finding
      var item = el("li", f.text, f.severity === "info" ? "" : f.severity);
      var k = findingItems.length;
      item.addEventListener("click", function () { chooseFinding(k); });
      findingItems.push([item, f]);
      list.appendChild(item);
    });
    var drawn = drawTimeline() + drawLifetime() + drawPool();
    renderTable();
    return drawn;
  }

  document.getElementById("file").textContent = DATA.file + " (" + DATA.producer + ")";
  var select = document.getElementById("device");
  DATA.devices.forEach(function (d, i) { select.appendChild(el("option", "device " + d.device + " (" + d.events + " events)")); select.lastChild.value = i; });
  select.addEventListener("change", function () { selectDevice(+select.value); });
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("reset").addEventListener("click", function () { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); });
  document.getElementById("moment").addEventListener("input", drawPool);
  ["search", "min-size", "max-size"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", function () { tableSel = -1; renderTable(); });
  });
  ["state-filter", "in-range"].forEach(function (id) {
    document.getElementById(id).addEventListener("change", function () { tableSel = -1; renderTable(); });
  });
  var tabButtons = document.querySelectorAll(".tabs button");
  for (var tb = 0; tb < tabButtons.length; tb++) tabButtons[tb].addEventListener("click", function (ev) {
    switchTab(ev.target.getAttribute("data-tab"));
  });
  document.getElementById("clear-highlight").addEventListener("click", clearHighlight);
  document.addEventListener("keydown", onKey);
  bindCanvas(document.getElementById("timeline"), function (px, py, w) { marker = Math.round(pxToX(px, w)); chooseMoment(marker); drawTimeline(); });
  bindCanvas(document.getElementById("lifetime"), function (px, py) {
    for (var i = drawnBlocks.length - 1; i >= 0; i--) {
      var h = drawnBlocks[i];
      if (px >= h[0] && px <= h[0] + h[2] && py >= h[1] - 1 && py <= h[1] + h[3]) {
        selected = h[4]; showBlock(blockFromRow(h[4])); drawLifetime(); return;
      }
    }
  });
  document.getElementById("pool").addEventListener("click", function (ev) {
    var rect = ev.target.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    for (var i = poolBoxes.length - 1; i >= 0; i--) {
      var h = poolBoxes[i];
      if (px >= h[0] && px <= h[0] + h[2] && py >= h[1] && py <= h[1] + h[3]) {
        var b = h[4];
        var what = b[2] ? " (pending free)" : " (allocated)";
        if (b[3] < 0) what = " and the blocks touching it" + what;
        showBlock({ id: b[3] < 0 ? "run" : b[3], size: b[1], requested: b[1], stack: b[4],
                    addr: h[5].addr + " + " + b[0], alloc: -2, free: -2 }, what);
        return;
      }
    }
  });
  window.addEventListener("resize", function () { if (dev) { redraw(); drawPool(); } });

  // report.html#device=1&event=421 opens a device focused on an event (links from findings)
  // (also search=, min=, state=, tab=, finding=N and keys=... for links and browser tests)
  var wanted = {}, text = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var parts = kv.split("=");
    if (parts.length === 2) { wanted[parts[0]] = +parts[1]; text[parts[0]] = decodeURIComponent(parts[1]); }
  });
  var start = 0;
  DATA.devices.forEach(function (d, i) { if (d.device === wanted.device) start = i; });
  select.value = start;
  var drawn = DATA.devices.length ? selectDevice(start) : 0;
  if (dev && wanted.event >= 0 && wanted.event < dev.events) focusEvent(wanted.event);
  if (dev) {
    if (text.search !== undefined) document.getElementById("search").value = text.search;
    if (text.min !== undefined) document.getElementById("min-size").value = text.min;
    if (text.state !== undefined) document.getElementById("state-filter").value = text.state;
    if (text.search !== undefined || text.min !== undefined || text.state !== undefined) {
      document.getElementById("in-range").checked = false;
    }
    switchTab(text.tab || "blocks");
    if (wanted.finding >= 0) chooseFinding(wanted.finding);
    (text.keys || "").split("").forEach(function (key) {
      var name = { d: "ArrowDown", u: "ArrowUp", e: "Enter" }[key] || key;
      document.dispatchEvent(new KeyboardEvent("keydown", { key: name, bubbles: true }));
    });
  }
  document.body.setAttribute("data-render", "ok");
  document.body.setAttribute("data-drawn", String(drawn));
  // navigation start to rendered (parse, JSON, first draw, tables): read by bench/memory_bench.py
  document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
  statusEl.textContent = "rendered " + drawn + " items";
})();

// npu-migrate memory report viewer: plain canvas and DOM over columns decoded in the page.
"use strict";
(function () {
  var statusEl = document.getElementById("status");
  window.onerror = function (message) {
    document.body.setAttribute("data-error", String(message));
    statusEl.textContent = "script error: " + message;
    statusEl.className = "status error";
  };
  window.addEventListener("unhandledrejection", function (ev) {
    window.onerror(ev.reason && ev.reason.message ? ev.reason.message : String(ev.reason));
  });

  var DATA = JSON.parse(document.getElementById("data").textContent);
  var STATES = ["active_allocated", "active_pending_free", "freed"];
  var MAX_ROWS = 300;        // rows listed at once (the count says how many match)
  var MAX_DRAWN = 2500;      // blocks drawn in the lifetime chart
  var MAX_SEGMENTS = 64;     // segments drawn in the pool view
  var body = document.body;

  var dev = null;            // current device payload
  var D = null;              // its decoded columns and derived arrays
  var view = { x0: 0, x1: 1 };
  var cursor = 0;            // the current event: flame graph and pool view follow it
  var marker = null;         // event highlighted by a finding
  var highlight = null;      // {ids: Set} blocks of the clicked finding
  var tab = "blocks", sort = { key: null, dir: 1 };
  var tableRows = [], tableSel = -1, openRow = null;
  var findingItems = [], findingSel = -1;
  var drawnBlocks = [], poolBoxes = [], flameBoxes = [], flameZoom = [];
  var flameView = "frame";
  var limits = null;         // inefficient thresholds

  // ---- small helpers --------------------------------------------------------------------
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
    var g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    return { ctx: g, w: width, h: height };
  }
  function lowerBound(arr, value) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function eventLabel(e) {
    var s = dev.series, text = e < 0 ? "before the first event" : "event " + e;
    if (e >= 0 && s.t && s.x.length) {
      var i = Math.max(0, lowerBound(s.x, e + 1) - 1);
      text += " (+" + s.t[i].toFixed(3) + " s)";
    }
    return text;
  }
  function hex(v) { return v >= 0 ? "0x" + v.toString(16) : "-"; }
  var UNITS = { "": 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1048576, mb: 1048576, mib: 1048576,
                g: 1073741824, gb: 1073741824, gib: 1073741824 };
  function parseSize(text) {
    var m = /^\s*([0-9.]+)\s*([a-zA-Z]*)\s*$/.exec(text || "");
    if (!m || !(m[2].toLowerCase() in UNITS)) return null;
    return parseFloat(m[1]) * UNITS[m[2].toLowerCase()];
  }

  // ---- decoding: base64 -> inflate (the browser's DecompressionStream) -> unshuffle --------
  var TYPES = { int8: Int8Array, int32: Int32Array, float64: Float64Array, uint8: Uint8Array };
  function inflate(b64) {
    var bin = atob(b64), raw = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) raw[i] = bin.charCodeAt(i);
    var stream = new Blob([raw]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer();
  }
  function unshuffle(buffer, type, n) {
    var Type = TYPES[type], width = Type.BYTES_PER_ELEMENT, src = new Uint8Array(buffer);
    var out = new Uint8Array(n * width);
    for (var b = 0; b < width; b++) {
      var plane = b * n;
      for (var i = 0; i < n; i++) out[i * width + b] = src[plane + i];
    }
    return new Type(out.buffer);
  }
  function decodeDevice(d) {
    if (d._decoded) return Promise.resolve(d._decoded);
    var names = Object.keys(d.columns);
    return Promise.all(names.map(function (name) {
      var c = d.columns[name];
      return (c.n ? inflate(c.b64) : Promise.resolve(new ArrayBuffer(0))).then(function (buf) {
        return unshuffle(buf, c.dtype, c.n);
      });
    })).then(function (arrays) {
      var cols = {};
      names.forEach(function (name, i) { cols[name] = arrays[i]; });
      d._decoded = derive(d, cols);
      return d._decoded;
    });
  }

  // Per-event series recomputed exactly from the blocks and segment events, and each event's
  // block row, so that any event can be inspected (the timeline itself is pre-aggregated).
  function derive(d, c) {
    var n = d.events, nb = c.alloc.length;
    var counted = d.counted === "size" ? c.size : c.req;
    var dAlloc = new Float64Array(n + 1), dActive = new Float64Array(n + 1), dRes = new Float64Array(n + 1);
    var evBlock = new Int32Array(n).fill(-1), evKind = new Int8Array(n).fill(-1);
    var A = d.actions, ALLOC = A.indexOf("alloc"), FREQ = A.indexOf("free_requested"), FDONE = A.indexOf("free_completed");
    for (var r = 0; r < nb; r++) {
      var a = c.alloc[r], q = c.freq[r], f = c.free[r], w = counted[r];
      if (a >= 0) { dAlloc[a] += w; dActive[a] += w; evBlock[a] = r; evKind[a] = ALLOC; }
      if (q >= 0) { dAlloc[q] -= w; evBlock[q] = r; evKind[q] = FREQ; }
      if (f >= 0) { dActive[f] -= w; if (evKind[f] < 0) { evBlock[f] = r; evKind[f] = FDONE; } }
    }
    var other = d.events_other.other, grow = [A.indexOf("segment_alloc"), A.indexOf("segment_map")];
    var shrink = [A.indexOf("segment_free"), A.indexOf("segment_unmap")];
    var segEvents = [];
    other.forEach(function (o) {
      evKind[o[0]] = o[1];
      if (grow.indexOf(o[1]) >= 0) dRes[o[0]] += o[4];
      if (shrink.indexOf(o[1]) >= 0) dRes[o[0]] -= o[4];
      if (grow.indexOf(o[1]) >= 0 || shrink.indexOf(o[1]) >= 0) segEvents.push(o);
    });
    var allocated = new Float64Array(n), active = new Float64Array(n), reserved = new Float64Array(n);
    var sa = d.initial[0], sb = d.initial[1], sr = d.initial[2];
    for (var e = 0; e < n; e++) {
      sa += dAlloc[e]; sb += dActive[e]; sr += dRes[e];
      allocated[e] = sa; active[e] = sb; reserved[e] = sr;
    }
    var stackSite = {}, siteLower = {};
    Object.keys(d.stacks.stacks).forEach(function (k) {
      stackSite[k] = d.stacks.stacks[k][0];
      siteLower[k] = d.stacks.stacks[k][0].toLowerCase();
    });
    return { c: c, nb: nb, counted: counted, allocated: allocated, active: active, reserved: reserved,
             evBlock: evBlock, evKind: evKind, segEvents: segEvents, otherByEvent: indexOther(other),
             stackSite: stackSite, siteLower: siteLower, byWeight: null, flags: null };
  }
  function indexOther(other) {
    var map = new Map();
    other.forEach(function (o) { map.set(o[0], o); });
    return map;
  }
  function isAllocated(r, e) {
    var c = D.c, a = c.alloc[r], q = c.freq[r], f = c.free[r];
    return a <= e && (q === -1 || q > e) && (f < 0 || f > e);
  }
  function isActive(r, e) {
    var f = D.c.free[r];
    return D.c.alloc[r] <= e && (f < 0 || f > e);
  }

  // ---- inefficient flags: msMemScope accesses against the thresholds, plus the snapshot's --
  function parseLimit(text) {
    var t = String(text || "").trim().toLowerCase(), m;
    if ((m = /^(\d+(?:\.\d+)?)\s*%$/.exec(t)) && +m[1] > 0 && +m[1] < 100) return { share: +m[1] / 100, micros: null };
    if ((m = /^(\d+(?:\.\d+)?)\s*(us|ms|s)$/.exec(t))) return { share: null, micros: +m[1] * { us: 1, ms: 1e3, s: 1e6 }[m[2]] };
    return null;
  }
  function limitText(l) { return l.micros !== null ? l.micros + "us" : (l.share * 100) + "%"; }
  function over(limit, gap, life) { return limit.micros !== null ? gap > limit.micros : gap > limit.share * life; }
  function computeFlags() {
    var c = D.c, nb = D.nb, flags = new Uint8Array(nb), count = 0;
    var hasAccess = !!c.access_first;
    for (var r = 0; r < nb; r++) {
      var f = c.flags[r] ? 2 : 0;  // snapshot: held across iterations until replaced (delayed)
      if (hasAccess && !isNaN(c.access_first[r])) {
        var start = c.time_alloc[r], end = c.time_free[r], life = Math.max(end - start, 1);
        if (over(limits.lazy, c.access_first[r] - start, life)) f |= 1;
        if (over(limits.delayed, end - c.access_last[r], life)) f |= 2;
        if (over(limits.idle, c.access_gap[r], life)) f |= 4;
      }
      flags[r] = f;
      if (f) count++;
    }
    D.flags = flags;
    body.setAttribute("data-inefficient", String(count));
    return count;
  }
  function flagText(r) {
    var f = D.flags[r], out = [];
    if (f & 1) out.push("lazy");
    if (f & 2) out.push(D.c.flags[r] ? "held until replaced" : "delayed");
    if (f & 4) out.push("idle");
    return out.join(" ");
  }

  // ---- timeline and overview -------------------------------------------------------------
  var PAD_L = 70;
  function xToPx(x, w) { return PAD_L + (x - view.x0) / (view.x1 - view.x0) * (w - PAD_L - 8); }
  function pxToX(px, w) { return view.x0 + (px - PAD_L) / (w - PAD_L - 8) * (view.x1 - view.x0); }

  // Buckets folded into one column per pixel first (max of maxima, min of minima): a path of
  // 20,000 points costs the software rasterizer seconds, one of 2 x width points nothing.
  function perPixel(s, lo, hi, x) {
    var cols = { px: [], amax: [], amin: [], rmax: [], rmin: [], act: [] }, last = null;
    for (var i = lo; i < hi; i++) {
      var px = Math.round(x(s.x[i])), k = cols.px.length - 1;
      if (px !== last) {
        cols.px.push(px); cols.amax.push(s.amax[i]); cols.amin.push(s.amin[i]);
        cols.rmax.push(s.rmax[i]); cols.rmin.push(s.rmin[i]); cols.act.push(s.act[i]); last = px;
      } else {
        cols.amax[k] = Math.max(cols.amax[k], s.amax[i]); cols.amin[k] = Math.min(cols.amin[k], s.amin[i]);
        cols.rmax[k] = Math.max(cols.rmax[k], s.rmax[i]); cols.rmin[k] = Math.min(cols.rmin[k], s.rmin[i]);
        cols.act[k] = Math.max(cols.act[k], s.act[i]);
      }
    }
    return cols;
  }
  function drawSeries(g, s, lo, hi, x, y) {
    var p = perPixel(s, lo, hi, x), n = p.px.length;
    function band(maxKey, minKey, fill) {
      g.beginPath();
      for (var i = 0; i < n; i++) g.lineTo(p.px[i], y(p[maxKey][i]));
      for (var j = n - 1; j >= 0; j--) g.lineTo(p.px[j], y(p[minKey][j]));
      g.closePath(); g.fillStyle = fill; g.fill();
    }
    function line(key, color, width) {
      g.beginPath(); g.strokeStyle = color; g.lineWidth = width;
      for (var i = 0; i < n; i++) { if (i === 0) g.moveTo(p.px[i], y(p[key][i])); else g.lineTo(p.px[i], y(p[key][i])); }
      g.stroke(); g.lineWidth = 1;
    }
    band("rmax", "rmin", "rgba(150,155,165,0.35)");
    line("rmax", "#7a808c", 1);
    line("act", "#f08c28", 1);
    band("amax", "amin", "rgba(40,100,220,0.25)");
    line("amax", "#2864dc", 1.5);
  }
  function drawTimeline() {
    var c = setupCanvas(document.getElementById("timeline")), g = c.ctx, s = dev.series;
    g.clearRect(0, 0, c.w, c.h);
    if (!s.x.length) { g.fillText("no events recorded on this device", PAD_L, 40); return 0; }
    var lo = Math.max(0, lowerBound(s.x, view.x0) - 1), hi = Math.min(s.x.length, lowerBound(s.x, view.x1) + 1);
    var top = 1;
    for (var i = lo; i < hi; i++) top = Math.max(top, s.rmax[i], s.amax[i], s.act[i]);
    var plotH = c.h - 24;
    function y(v) { return 6 + plotH - v / top * plotH; }
    g.strokeStyle = "#e3e6eb"; g.fillStyle = "#667"; g.font = "11px sans-serif";
    for (var k = 0; k <= 4; k++) {
      var yy = y(top * k / 4);
      g.beginPath(); g.moveTo(PAD_L, yy); g.lineTo(c.w - 8, yy); g.stroke();
      g.fillText(bytes(top * k / 4), 4, yy + 4);
    }
    g.strokeStyle = "rgba(80,160,80,0.35)";
    var steps = (dev.steps || []).filter(function (st) { return st >= view.x0 && st <= view.x1; });
    if (steps.length * 4 < c.w) steps.forEach(function (st) {
      var px = xToPx(st, c.w); g.beginPath(); g.moveTo(px, 6); g.lineTo(px, 6 + plotH); g.stroke();
    });
    drawSeries(g, s, lo, hi, function (v) { return xToPx(v, c.w); }, y);
    (dev.marks || []).forEach(function (m) {
      if (m.event < view.x0 || m.event > view.x1) return;
      var px = xToPx(m.event, c.w);
      g.fillStyle = m.severity === "error" ? "#c01818" : m.severity === "warning" ? "#d08a00" : "#6a4cc0";
      g.beginPath(); g.moveTo(px - 5, 0); g.lineTo(px + 5, 0); g.lineTo(px, 9); g.fill();
    });
    [[marker, "#c01818", [4, 3]], [cursor, "#111", []]].forEach(function (m) {
      if (m[0] === null || m[0] < view.x0 || m[0] > view.x1) return;
      var mx = xToPx(m[0], c.w);
      g.strokeStyle = m[1]; g.setLineDash(m[2]);
      g.beginPath(); g.moveTo(mx, 0); g.lineTo(mx, 6 + plotH); g.stroke(); g.setLineDash([]);
    });
    g.fillStyle = "#667";
    g.fillText(eventLabel(Math.round(view.x0)), PAD_L, c.h - 4);
    var right = eventLabel(Math.round(view.x1));
    g.fillText(right, c.w - 8 - g.measureText(right).width, c.h - 4);
    document.getElementById("range").textContent = "events " + Math.round(view.x0) + "-" + Math.round(view.x1) + " of " + dev.events;
    drawOverview();
    return hi - lo;
  }
  function drawOverview() {
    var c = setupCanvas(document.getElementById("overview")), g = c.ctx, s = dev.series;
    g.clearRect(0, 0, c.w, c.h);
    if (!s.x.length) return;
    var full = Math.max(dev.events, 1), top = 1;
    for (var i = 0; i < s.x.length; i++) top = Math.max(top, s.rmax[i], s.amax[i]);
    function x(v) { return PAD_L + v / full * (c.w - PAD_L - 8); }
    function y(v) { return 4 + (c.h - 8) * (1 - v / top); }
    drawSeries(g, s, 0, s.x.length, x, y);
    g.fillStyle = "rgba(40,100,220,0.12)"; g.strokeStyle = "#2864dc";
    var b0 = x(view.x0), b1 = x(view.x1);
    g.fillRect(b0, 0, Math.max(b1 - b0, 2), c.h); g.strokeRect(b0, 0.5, Math.max(b1 - b0, 2), c.h - 1);
    g.strokeStyle = "#111"; g.beginPath(); g.moveTo(x(cursor), 0); g.lineTo(x(cursor), c.h); g.stroke();
    g.fillStyle = "#667"; g.font = "10px sans-serif"; g.fillText("whole trace", 4, 14);
  }
  function bindOverview() {
    var canvas = document.getElementById("overview"), drag = null;
    function toEvent(ev) {
      var rect = canvas.getBoundingClientRect();
      return Math.max(0, Math.min(dev.events, (ev.clientX - rect.left - PAD_L) / (rect.width - PAD_L - 8) * dev.events));
    }
    canvas.addEventListener("mousedown", function (ev) {
      var e = toEvent(ev), whole = view.x1 - view.x0 > 0.9 * dev.events;
      drag = e >= view.x0 && e <= view.x1 && !whole ? { pan: true, from: e, x0: view.x0, x1: view.x1 } : { pan: false, from: e };
    });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var e = toEvent(ev);
      if (drag.pan) { var dx = e - drag.from; view.x0 = drag.x0 + dx; view.x1 = drag.x1 + dx; clampView(); }
      else if (Math.abs(e - drag.from) > 1) { view.x0 = Math.min(e, drag.from); view.x1 = Math.max(e, drag.from, view.x0 + 10); clampView(); }
      redraw();
    });
    window.addEventListener("mouseup", function () { if (drag) { drag = null; redraw(); } });
  }
  function brush(x0, x1) { view.x0 = x0; view.x1 = Math.max(x1, x0 + 1); clampView(); redraw(); }

  // ---- the current event: step with the arrow keys, follow with the flame and the pool -----
  var pending = false;
  function setCursor(e) {
    cursor = Math.max(dev.peak.event < 0 ? -1 : 0, Math.min(dev.events - 1, Math.round(e)));
    if (cursor < view.x0 || cursor > view.x1) {
      var span = view.x1 - view.x0;
      view.x0 = cursor - span / 2; view.x1 = cursor + span / 2; clampView();
    }
    body.setAttribute("data-event", String(cursor));
    document.getElementById("cursor").textContent = "current: " + eventLabel(cursor) +
      (D ? ", allocated " + bytes(cursor >= 0 ? D.allocated[cursor] : dev.initial[0]) : "");
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawTimeline(); if (D) { drawFlame(); drawPool(); } });
  }
  function stepCursor(delta) { setCursor(cursor + delta); }

  // ---- flame graph (icicle) at the current event ----------------------------------------
  function groupOf(r) {
    var c = D.c, t = dev.tables;
    if (flameView === "operator") return c.op && c.op[r] >= 0 ? t.operators[c.op[r]] : "<no operator recorded>";
    if (flameView === "thread") return c.thread && t.threads[c.thread[r]] ? "thread " + t.threads[c.thread[r]] : "<no thread recorded>";
    if (flameView === "stream") return "stream " + t.streams[c.stream[r]];
    return null;
  }
  function flameTree(e) {
    var c = D.c, sums = new Map(), root = { name: "all", bytes: 0, blocks: 0, kids: new Map() };
    for (var r = 0; r < D.nb; r++) {
      if (!isAllocated(r, e)) continue;
      var key = (flameView === "frame" ? "" : groupOf(r)) + "\u0000" + c.stack[r];
      var cell = sums.get(key);
      if (!cell) sums.set(key, cell = [0, 0]);
      cell[0] += D.counted[r]; cell[1] += 1;
    }
    var frames = dev.stacks.frames, stacks = dev.stacks.stacks;
    sums.forEach(function (cell, key) {
      var cut = key.indexOf("\u0000"), group = key.slice(0, cut), stack = key.slice(cut + 1);
      var path = stacks[stack] ? stacks[stack][1].map(function (f) { return frames[f]; }) : ["<no stack recorded>"];
      if (group) path = (path.length === 1 && path[0] === "operator " + group) ? [group] : [group].concat(path);
      var node = root;
      node.bytes += cell[0]; node.blocks += cell[1];
      path.forEach(function (name) {
        var next = node.kids.get(name);
        if (!next) node.kids.set(name, next = { name: name, bytes: 0, blocks: 0, kids: new Map() });
        next.bytes += cell[0]; next.blocks += cell[1]; node = next;
      });
    });
    return root;
  }
  function ranked(node) { return Array.from(node.kids.values()).sort(function (a, b) { return b.bytes - a.bytes || (a.name < b.name ? -1 : 1); }); }
  function drawFlame() {
    var t0 = performance.now();
    var canvas = document.getElementById("flame");
    flameBoxes = [];
    var root = flameTree(cursor), top = root;
    for (var z = 0; z < flameZoom.length; z++) {
      var next = top.kids.get(flameZoom[z]);
      if (!next) { flameZoom = flameZoom.slice(0, z); break; }
      top = next;
    }
    var rowH = 16, maxDepth = 40;
    canvas.height = Math.min(depthOf(top), maxDepth) * rowH + 2;
    canvas._ratio = 1;
    var c = setupCanvas(canvas), g = c.ctx;
    g.clearRect(0, 0, c.w, c.h);
    g.font = "11px sans-serif";
    function box(node, x0, width, depth, path) {
      if (depth >= maxDepth || width < 0.5) return;
      var y0 = depth * rowH, hue = 20 + (hash(node.name) % 40);
      g.fillStyle = depth === 0 ? "#c9ced6" : "hsl(" + hue + ",75%," + (62 + (hash(node.name) % 12)) + "%)";
      g.fillRect(x0, y0, Math.max(width - 1, 0.5), rowH - 1);
      flameBoxes.push([x0, y0, width, rowH, node, depth, path]);
      if (width > 40) {
        g.fillStyle = "#1d2330";
        var label = shortFrame(node.name) + " (" + bytes(node.bytes) + ")";
        g.save(); g.beginPath(); g.rect(x0, y0, width - 2, rowH); g.clip();
        g.fillText(label, x0 + 3, y0 + 12); g.restore();
      }
      var x = x0;
      ranked(node).forEach(function (kid) {
        var w = node.bytes ? kid.bytes / node.bytes * width : 0;
        box(kid, x, w, depth + 1, path.concat([kid.name])); x += w;
      });
    }
    box(top, 0, c.w, 0, flameZoom.slice());
    var kids = ranked(top);
    document.getElementById("flame-label").textContent = "after " + eventLabel(cursor) + ": " + bytes(root.bytes) +
      " in " + root.blocks + " blocks" + (flameZoom.length ? "; zoomed into " + flameZoom[flameZoom.length - 1] : "");
    var ms = performance.now() - t0;
    body.setAttribute("data-flame-ms", ms.toFixed(1));
    body.setAttribute("data-flame-total", String(root.bytes));
    body.setAttribute("data-flame-top", kids.length ? kids[0].name : "");
    body.setAttribute("data-flame-view", flameView);
    return root;
  }
  function depthOf(node) {
    var deepest = 0;
    node.kids.forEach(function (kid) { deepest = Math.max(deepest, depthOf(kid)); });
    return deepest + 1;
  }
  // "/home/u/project/model.py:41 forward" -> "model.py:41 forward" (the hover shows it all)
  function shortFrame(name) { return name.replace(/^[^ ]*[\/\\]([^\/\\ ]+:\d+ )/, "$1"); }
  function hash(text) { var h = 0; for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0; return Math.abs(h); }
  function bindFlame() {
    var canvas = document.getElementById("flame");
    function hit(ev) {
      var rect = canvas.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
      for (var i = flameBoxes.length - 1; i >= 0; i--) {
        var b = flameBoxes[i];
        if (px >= b[0] && px <= b[0] + b[2] && py >= b[1] && py <= b[1] + b[3]) return b;
      }
      return null;
    }
    canvas.addEventListener("click", function (ev) {
      var b = hit(ev);
      if (!b) return;
      flameZoom = b[5] === 0 ? flameZoom.slice(0, -1) : b[6];
      drawFlame();
    });
    canvas.addEventListener("mousemove", function (ev) {
      var b = hit(ev);
      document.getElementById("flame-hover").textContent = b ? b[4].name + ": " + bytes(b[4].bytes) + " in " + b[4].blocks + " blocks" : "";
    });
    document.getElementById("flame-view").addEventListener("change", function (ev) {
      flameView = ev.target.value; flameZoom = []; drawFlame();
    });
  }

  // ---- block lifetimes -----------------------------------------------------------------
  function drawLifetime() {
    var c = setupCanvas(document.getElementById("lifetime")), g = c.ctx, cols = D.c;
    g.clearRect(0, 0, c.w, c.h);
    drawnBlocks = [];
    if (!D.byWeight) D.byWeight = sortedRows(allRows(), function (r) {
      // bytes x events on a log scale (an integer key sorts fast; drawing order needs no more)
      var b = Math.max(cols.alloc[r], 0), e = cols.free[r] < 0 ? dev.events : cols.free[r];
      return Math.round(Math.log(cols.size[r] * Math.max(e - b, 1) + 1) * 1e7);
    }, -1);
    var space = Math.max(dev.space.total, 1), plotH = c.h - 8, drawn = 0;
    for (var k = 0; k < D.byWeight.length && drawn < MAX_DRAWN; k++) {
      var r = D.byWeight[k], b0 = Math.max(cols.alloc[r], 0), b1 = cols.free[r] < 0 ? dev.events : cols.free[r];
      if (b1 < view.x0 || b0 > view.x1) continue;
      var x0 = Math.max(xToPx(b0, c.w), PAD_L), x1 = Math.min(xToPx(b1, c.w), c.w - 8);
      var y0 = 4 + cols.y[r] / space * plotH, h = Math.max(cols.size[r] / space * plotH, 1);
      g.fillStyle = openRow === r ? "#111" : "hsla(" + ((cols.stack[r] * 47) % 360) + ",60%,50%,0.75)";
      g.fillRect(x0, y0, Math.max(x1 - x0, 1), h);
      if (highlight && highlight.ids.has(r)) {
        g.strokeStyle = "#d23c3c"; g.lineWidth = 2; g.strokeRect(x0 - 1, y0 - 1, Math.max(x1 - x0, 1) + 2, h + 2); g.lineWidth = 1;
      }
      drawnBlocks.push([x0, y0, Math.max(x1 - x0, 1), Math.max(h, 3), r]);
      drawn++;
    }
    g.fillStyle = "#667"; g.font = "11px sans-serif";
    g.fillText("address", 4, 14); g.fillText("space", 4, 26); g.fillText(bytes(space), 4, 38);
    document.getElementById("lifetime-note").textContent = drawn + " of " + D.nb + " blocks drawn (the most bytes x events in view)";
    return drawn;
  }

  // ---- pool state at any event, computed here: the same rules as `npu-migrate memory pool` --
  function poolAt(e) {
    var ev = dev.events_other, A = dev.actions;
    var ranges = ev.final_segments.map(function (s) { return [s[0], s[0] + s[2], s[3], s[4]]; });
    var grow = [A.indexOf("segment_alloc"), A.indexOf("segment_map")];
    for (var k = D.segEvents.length - 1; k >= 0; k--) {
      var s = D.segEvents[k];
      if (s[0] <= e) break;
      var start = s[2], end = s[2] + s[4];
      if (grow.indexOf(s[1]) >= 0) ranges = subtract(ranges, start, end);
      else {
        ranges.push([start, end, s[5], s[1] === A.indexOf("segment_unmap")]);
        if (s[1] === A.indexOf("segment_unmap")) ranges = mergeExpandable(ranges);
      }
    }
    ranges.sort(function (a, b) { return a[0] - b[0]; });
    var live = [];
    for (var r = 0; r < D.nb; r++) if (isActive(r, e)) live.push(r);
    var addr = D.c.addr, size = D.c.size;
    live.sort(function (a, b) { return addr[a] - addr[b]; });
    var addrs = live.map(function (r) { return addr[r]; }), placed = new Set();
    var real = ranges.filter(function (rg) { return rg[0] !== ev.pseudo; });
    var segs = real.map(function (rg) {
      var lo = lowerBound(addrs, rg[0]), hi = lowerBound(addrs, rg[1]), used = 0, largest = 0, pieces = 0, at = rg[0];
      var rows = live.slice(lo, hi);
      rows.forEach(function (r) { placed.add(r); });
      rows.forEach(function (r) {
        used += Math.min(size[r], rg[1] - addr[r]);
        if (addr[r] > at) { pieces++; largest = Math.max(largest, addr[r] - at); }
        at = Math.max(at, addr[r] + size[r]);
      });
      if (rg[1] > at) { pieces++; largest = Math.max(largest, rg[1] - at); }
      return { start: rg[0], size: rg[1] - rg[0], stream: rg[2], expandable: rg[3], rows: rows,
               used: used, free: rg[1] - rg[0] - used, largest: largest, pieces: pieces };
    });
    // msMemScope pool totals: what is used is known, where it lies is not
    ranges.filter(function (rg) { return rg[0] === ev.pseudo; }).forEach(function (rg) {
      var rows = live.filter(function (r) { return !placed.has(r); }), used = 0, span = rg[1] - rg[0];
      rows.forEach(function (r) { used += size[r]; });
      used = Math.min(used, span);
      segs.push({ start: rg[0], size: span, stream: rg[2], expandable: rg[3], rows: [], pseudo: true,
                  used: used, free: span - used, largest: span - used, pieces: span > used ? 1 : 0 });
    });
    segs.sort(function (a, b) { return a.start - b.start; });
    var out = { event: e, segments: segs, reserved: 0, free: 0, largest: 0 };
    segs.forEach(function (s) { out.reserved += s.size; out.free += s.free; out.largest = Math.max(out.largest, s.largest); });
    return out;
  }
  function subtract(ranges, start, end) {
    var out = [];
    ranges.forEach(function (r) {
      if (r[1] <= start || r[0] >= end) { out.push(r); return; }
      if (r[0] < start) out.push([r[0], start, r[2], r[3]]);
      if (r[1] > end) out.push([end, r[1], r[2], r[3]]);
    });
    return out;
  }
  function mergeExpandable(ranges) {
    ranges.sort(function (a, b) { return a[0] - b[0]; });
    var out = [];
    ranges.forEach(function (r) {
      var last = out[out.length - 1];
      if (last && r[3] && last[3] && last[1] === r[0] && last[2] === r[2]) last[1] = r[1];
      else out.push(r.slice());
    });
    return out;
  }
  function drawPool() {
    var t0 = performance.now();
    var c = setupCanvas(document.getElementById("pool")), g = c.ctx;
    g.clearRect(0, 0, c.w, c.h);
    poolBoxes = [];
    var pool = poolAt(cursor);
    var segs = pool.segments.slice().sort(function (a, b) { return b.size - a.size; }).slice(0, MAX_SEGMENTS);
    document.getElementById("pool-label").textContent = "after " + eventLabel(cursor) + ": reserved " + bytes(pool.reserved) +
      ", free " + bytes(pool.free) + " (reserved minus the blocks in use or pending free), largest free block " + bytes(pool.largest) +
      ", " + pool.segments.length + " segments" + (pool.segments.length > MAX_SEGMENTS ? " (the " + MAX_SEGMENTS + " largest drawn)" : "");
    var rowH = Math.max(Math.min(18, (c.h - 4) / Math.max(segs.length, 1)), 3), biggest = 1;
    segs.forEach(function (s) { biggest = Math.max(biggest, s.size); });
    var width = c.w - 150;
    segs.forEach(function (s, i) {
      var y0 = 2 + i * rowH, w = Math.max(s.size / biggest * width, 2);
      g.fillStyle = "#d9dce2"; g.fillRect(140, y0, w, rowH - 1);
      if (s.pseudo) { g.fillStyle = "#2864dc"; g.fillRect(140, y0, s.used / s.size * w, rowH - 1); }
      s.rows.forEach(function (r) {
        var bx = 140 + (D.c.addr[r] - s.start) / s.size * w, bw = Math.max(D.c.size[r] / s.size * w, 0.5);
        var pendingFree = !isAllocated(r, cursor);
        g.fillStyle = pendingFree ? "#d23c3c" : "#2864dc";
        g.fillRect(bx, y0, bw, rowH - 1);
        poolBoxes.push([bx, y0, Math.max(bw, 2), rowH, r]);
      });
      if (rowH >= 9) {
        g.fillStyle = "#445"; g.font = "10px sans-serif";
        g.fillText((s.pseudo ? "pool total" : hex(s.start).slice(-9)) + " " + bytes(s.size), 2, y0 + rowH - 3);
      }
    });
    body.setAttribute("data-pool-event", String(cursor));
    body.setAttribute("data-pool-free", String(pool.free));
    body.setAttribute("data-pool-reserved", String(pool.reserved));
    body.setAttribute("data-pool-largest", String(pool.largest));
    body.setAttribute("data-pool-ms", (performance.now() - t0).toFixed(1));
    return pool;
  }

  // ---- tables ---------------------------------------------------------------------------
  function allRows() { var rows = new Int32Array(D.nb); for (var i = 0; i < D.nb; i++) rows[i] = i; return rows; }
  // Sort rows by a numeric key, stably. Integer keys spanning less than 2^32 take a two-pass
  // radix sort (linear: a million rows in tens of ms); other keys a comparator sort.
  function sortedRows(rows, keyOf, dir) {
    var n = rows.length, keys = new Float64Array(n), min = Infinity, max = -Infinity, integral = true;
    for (var i = 0; i < n; i++) {
      var k = keyOf(rows[i]);
      keys[i] = k;
      if (k < min) min = k;
      if (k > max) max = k;
      if (k !== Math.floor(k)) integral = false;
    }
    var out = new Int32Array(n);
    if (n && integral && isFinite(min) && max - min < 4294967296) {
      var u = new Uint32Array(n);
      for (var j = 0; j < n; j++) u[j] = dir > 0 ? keys[j] - min : max - keys[j];
      var order = radixOrder(u);
      for (var q = 0; q < n; q++) out[q] = rows[order[q]];
      return out;
    }
    var idx = new Int32Array(n);
    for (var m = 0; m < n; m++) idx[m] = m;
    idx.sort(function (x, y) {
      var d = keys[x] - keys[y];
      if (isNaN(d)) d = isNaN(keys[x]) ? (isNaN(keys[y]) ? 0 : 1) : -1;
      return d * dir || x - y;
    });
    for (var z = 0; z < n; z++) out[z] = rows[idx[z]];
    return out;
  }
  function radixOrder(keys) {
    var n = keys.length, a = new Uint32Array(n), b = new Uint32Array(n);
    for (var i = 0; i < n; i++) a[i] = i;
    for (var shift = 0; shift < 32; shift += 16) {
      var counts = new Uint32Array(65537);
      for (var j = 0; j < n; j++) counts[((keys[a[j]] >>> shift) & 65535) + 1]++;
      for (var c = 1; c <= 65536; c++) counts[c] += counts[c - 1];
      for (var k = 0; k < n; k++) { var v = (keys[a[k]] >>> shift) & 65535; b[counts[v]++] = a[k]; }
      var t = a; a = b; b = t;
    }
    return a;
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
  function textMatcher(text) {
    if (!text) return null;
    var t = dev.tables, stackHit = {}, opHit = [], ownerHit = [];
    Object.keys(D.siteLower).forEach(function (k) { if (D.siteLower[k].indexOf(text) >= 0) stackHit[k] = true; });
    (t.operators || []).forEach(function (o, i) { opHit[i] = o.toLowerCase().indexOf(text) >= 0; });
    (t.owners || []).forEach(function (o, i) { ownerHit[i] = o.toLowerCase().indexOf(text) >= 0; });
    return function (r) {
      var c = D.c;
      if (stackHit[c.stack[r]]) return true;
      if (c.op && c.op[r] >= 0 && opHit[c.op[r]]) return true;
      if (c.owner && c.owner[r] >= 0 && ownerHit[c.owner[r]]) return true;
      return hex(c.addr[r]).indexOf(text) >= 0;
    };
  }
  var BLOCK_COLUMNS = [
    ["id", function (r) { return r; }, function (r) { return r; }],
    ["allocation id", function (r) { return D.c.allocid ? D.c.allocid[r] : r; }, function (r) { return D.c.allocid && D.c.allocid[r] >= 0 ? D.c.allocid[r] : "-"; }, "allocid"],
    ["size", function (r) { return D.c.size[r]; }, function (r) { return bytes(D.c.size[r]); }],
    ["requested", function (r) { return D.c.req[r]; }, function (r) { return bytes(D.c.req[r]); }],
    ["address", function (r) { return D.c.addr[r]; }, function (r) { return hex(D.c.addr[r]); }],
    ["state", function (r) { return D.c.state[r]; }, function (r) { return STATES[D.c.state[r]]; }],
    ["alloc event", function (r) { return D.c.alloc[r]; }, function (r) { return D.c.alloc[r] < 0 ? "before" : D.c.alloc[r]; }],
    ["free event", function (r) { return D.c.free[r] < 0 ? dev.events + 1 : D.c.free[r]; }, function (r) { return D.c.free[r] < 0 ? "-" : D.c.free[r]; }],
    ["lifetime (events)", lifetime, function (r) { return lifetime(r); }],
    ["process/thread", function (r) { return D.c.thread[r]; }, function (r) { return dev.tables.threads[D.c.thread[r]] || "-"; }, "thread"],
    ["stream", function (r) { return D.c.stream[r]; }, function (r) { return dev.tables.streams[D.c.stream[r]]; }, "nothread"],
    ["first access (us)", accessKey("access_first"), accessText("access_first"), "access_first"],
    ["last access (us)", accessKey("access_last"), accessText("access_last"), "access_first"],
    ["max access interval (us)", accessKey("access_gap"), accessText("access_gap"), "access_first"],
    ["accesses", accessKey("access_count"), accessText("access_count"), "access_first"],
    ["flags", function (r) { return D.flags[r]; }, flagText],
    ["operator", function (r) { return D.c.op[r]; }, function (r) { return D.c.op[r] >= 0 ? dev.tables.operators[D.c.op[r]] : "-"; }, "op"],
    ["owner", function (r) { return D.c.owner[r]; }, function (r) { return D.c.owner[r] >= 0 ? dev.tables.owners[D.c.owner[r]] : "-"; }, "owner"],
    ["site", function (r) { return D.c.stack[r]; }, function (r) { return D.stackSite[D.c.stack[r]] || "<no stack recorded>"; }]
  ];
  function lifetime(r) { var b = Math.max(D.c.alloc[r], 0), e = D.c.free[r] < 0 ? dev.events : D.c.free[r]; return e - b; }
  function accessKey(name) { return function (r) { var v = D.c[name][r]; return isNaN(v) ? -1 : v; }; }
  function accessText(name) { return function (r) { var v = D.c[name][r]; return isNaN(v) ? "-" : v; }; }
  function blockColumns() {
    return BLOCK_COLUMNS.filter(function (col) {
      if (!col[3]) return true;
      if (col[3] === "nothread") return !D.c.thread;
      return !!D.c[col[3]];
    });
  }
  function blockMatches(f, only) {
    var c = D.c, match = textMatcher(f.text), out = new Int32Array(D.nb), count = 0;
    for (var r = 0; r < D.nb; r++) {
      if (only && !only.has(r)) continue;
      if (tab === "blocks" && highlight && !highlight.ids.has(r)) continue;
      if (tab === "inefficient" && !D.flags[r]) continue;
      if (f.min !== null && c.size[r] < f.min) continue;
      if (f.max !== null && c.size[r] > f.max) continue;
      if (f.state !== "" && c.state[r] !== +f.state) continue;
      if (f.range) { var end = c.free[r] < 0 ? dev.events : c.free[r]; if (end < view.x0 || c.alloc[r] > view.x1) continue; }
      if (match && !match(r)) continue;
      out[count++] = r;
    }
    return out.subarray(0, count);
  }
  var EVENT_COLUMNS = [
    ["id", function (e) { return e; }, function (e) { return e; }],
    ["action", function (e) { return D.evKind[e]; }, function (e) { return D.evKind[e] >= 0 ? dev.actions[D.evKind[e]] : "other"; }],
    ["address", eventAddr, function (e) { return hex(eventAddr(e)); }],
    ["size", eventSize, function (e) { return bytes(eventSize(e)); }],
    ["allocated", function (e) { return D.allocated[e]; }, function (e) { return bytes(D.allocated[e]); }],
    ["reserved", function (e) { return D.reserved[e]; }, function (e) { return bytes(D.reserved[e]); }],
    ["block", function (e) { return D.evBlock[e]; }, function (e) { return D.evBlock[e] >= 0 ? D.evBlock[e] : "-"; }],
    ["site", eventStack, function (e) { return D.stackSite[eventStack(e)] || "-"; }]
  ];
  function eventAddr(e) { var r = D.evBlock[e]; if (r >= 0) return D.c.addr[r]; var o = D.otherByEvent.get(e); return o ? o[2] : -1; }
  function eventSize(e) { var r = D.evBlock[e]; if (r >= 0) return D.counted[r]; var o = D.otherByEvent.get(e); return o ? o[4] : 0; }
  function eventStack(e) { var r = D.evBlock[e]; if (r >= 0) return D.c.stack[r]; var o = D.otherByEvent.get(e); return o ? o[6] : -1; }
  function eventMatches(f) {
    var lo = f.range ? Math.max(0, Math.floor(view.x0)) : 0, hi = f.range ? Math.min(dev.events, Math.ceil(view.x1) + 1) : dev.events;
    var match = null, out = new Int32Array(Math.max(hi - lo, 0)), count = 0;
    if (f.text) {
      var blockMatch = textMatcher(f.text);
      match = function (e) { var r = D.evBlock[e]; return r >= 0 ? blockMatch(r) : hex(eventAddr(e)).indexOf(f.text) >= 0 || (D.siteLower[eventStack(e)] || "").indexOf(f.text) >= 0; };
    }
    for (var e = lo; e < hi; e++) {
      if (f.min !== null || f.max !== null) { var s = eventSize(e); if ((f.min !== null && s < f.min) || (f.max !== null && s > f.max)) continue; }
      if (match && !match(e)) continue;
      out[count++] = e;
    }
    return out.subarray(0, count);
  }
  function siteRows() {
    var c = D.c, agg = new Map();
    for (var r = 0; r < D.nb; r++) {
      var key = D.stackSite[c.stack[r]] || "<no stack recorded>";
      var a = agg.get(key);
      if (!a) agg.set(key, a = [key, 0, 0, 0]);
      a[1] += 1; a[2] += D.counted[r];
      if (isAllocated(r, dev.peak.event)) a[3] += D.counted[r];
    }
    return Array.from(agg.values());
  }
  var SITE_COLUMNS = [
    ["site", function (a) { return a[0]; }, function (a) { return a[0]; }],
    ["blocks", function (a) { return a[1]; }, function (a) { return a[1]; }],
    ["bytes allocated", function (a) { return a[2]; }, function (a) { return bytes(a[2]); }],
    ["live at the peak", function (a) { return a[3]; }, function (a) { return bytes(a[3]); }]
  ];

  function renderTable() {
    var t0 = performance.now(), f = filters(), columns, items, note, kind;
    if (tab === "sites") {
      columns = SITE_COLUMNS; kind = "site";
      items = siteRows().filter(function (a) { return !f.text || a[0].toLowerCase().indexOf(f.text) >= 0; });
      if (sort.key === null) { sort.key = "live at the peak"; sort.dir = -1; }
      var col = columns.filter(function (c) { return c[0] === sort.key; })[0] || columns[3];
      items.sort(function (a, b) { var x = col[1](a), y = col[1](b); return (x < y ? -1 : x > y ? 1 : 0) * sort.dir; });
      note = items.length + " allocation sites over all " + D.nb + " blocks";
    } else if (tab === "events") {
      columns = EVENT_COLUMNS; kind = "event";
      items = sortBy(eventMatches(f), columns);
      note = "all " + dev.events + " events are in the page";
    } else {
      columns = blockColumns(); kind = "block";
      var only = tab === "leaked" ? findingBlocks("MEM001") : null;
      items = sortBy(blockMatches(f, only), columns);
      note = (only ? only.size + " blocks named by MEM001 findings; " : "") +
        (tab === "inefficient" ? "blocks flagged lazy, delayed (or held) or idle; " : "") + "all " + D.nb + " blocks are in the page";
      if (highlight && tab === "blocks") note = "blocks of the clicked finding; " + note;
    }
    var thead = document.querySelector("#table thead"), tbody = document.querySelector("#table tbody");
    thead.textContent = ""; tbody.textContent = "";
    var tr = el("tr");
    columns.forEach(function (c) {
      var th = el("th", c[0], sort.key === c[0] ? (sort.dir > 0 ? "asc" : "desc") : "");
      th.addEventListener("click", function () { sortTable(c[0]); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    tableRows = [];
    var shown = Math.min(items.length, MAX_ROWS);
    for (var i = 0; i < shown; i++) {
      var item = items[i], row = el("tr");
      if (kind === "block" && highlight && highlight.ids.has(item)) row.className = "hl";
      columns.forEach(function (c) {
        var td = el("td", String(c[2](item)));
        if (c[0] === "flags") td.className = "flags";
        row.appendChild(td);
      });
      (function (k) { row.addEventListener("click", function () { selectRow(k, true); }); })(i);
      tbody.appendChild(row);
      tableRows.push({ kind: kind, id: kind === "site" ? item[0] : item, item: item });
    }
    if (tableSel >= tableRows.length) tableSel = tableRows.length - 1;
    document.getElementById("table-note").textContent = items.length + " match" +
      (items.length > MAX_ROWS ? " (first " + MAX_ROWS + " listed)" : "") + "; " + note;
    body.setAttribute("data-table", tab);
    body.setAttribute("data-table-rows", String(tableRows.length));
    body.setAttribute("data-table-matches", String(items.length));
    body.setAttribute("data-table-first", tableRows.length ? String(tableRows[0].id) : "");
    body.setAttribute("data-sort", sort.key === null ? "" : sort.key + ":" + (sort.dir > 0 ? "asc" : "desc"));
    body.setAttribute("data-table-ms", (performance.now() - t0).toFixed(1));
    return tableRows.length;
  }
  function sortBy(rows, columns) {
    if (sort.key === null) return rows;
    var col = columns.filter(function (c) { return c[0] === sort.key; })[0];
    return col ? sortedRows(rows, col[1], sort.dir) : rows;
  }
  function sortTable(key) {
    var t0 = performance.now();
    if (sort.key === key) sort.dir = -sort.dir; else { sort.key = key; sort.dir = key === "id" ? 1 : -1; }
    tableSel = -1;
    renderTable();
    body.setAttribute("data-sort-ms", (performance.now() - t0).toFixed(1));
  }
  function selectRow(k, open) {
    if (!tableRows.length) return;
    tableSel = Math.max(0, Math.min(tableRows.length - 1, k));
    var trs = document.querySelectorAll("#table tbody tr");
    for (var i = 0; i < trs.length; i++) trs[i].classList.toggle("sel", i === tableSel);
    if (trs[tableSel] && trs[tableSel].scrollIntoView) trs[tableSel].scrollIntoView({ block: "nearest" });
    var r = tableRows[tableSel];
    body.setAttribute("data-selected-row", String(r.id));
    if (!open) return;
    if (r.kind === "block") { showBlock(r.item); if (D.c.alloc[r.item] >= 0) setCursor(D.c.alloc[r.item]); }
    else if (r.kind === "event") { showEvent(r.item); setCursor(r.item); }
    else { document.getElementById("search").value = r.item[0]; switchTab("blocks"); }
  }
  function stackLines(stack) {
    var s = dev.stacks.stacks[stack];
    if (!s) return ["call stack: <no stack recorded>"];
    var frames = s[1].map(function (f) { return "  " + dev.stacks.frames[f]; });
    return ["site " + s[0] + " (" + s[2] + ")", "call stack, outermost first:"].concat(frames);
  }
  function showBlock(r) {
    var c = D.c, t = dev.tables;
    openRow = r;
    var lines = ["block " + r + (c.allocid && c.allocid[r] >= 0 ? " (allocation id " + c.allocid[r] + ")" : ""),
      "address " + hex(c.addr[r]), "size " + bytes(c.size[r]) + " (requested " + bytes(c.req[r]) + ")",
      "state " + STATES[c.state[r]],
      "alloc event " + (c.alloc[r] < 0 ? "before the window" : c.alloc[r]),
      "free requested " + (c.freq[r] === -1 ? "never" : c.freq[r] === -2 ? "before the window" : c.freq[r]),
      "free event " + (c.free[r] < 0 ? "not freed in the window" : c.free[r]),
      c.thread ? "process/thread " + (t.threads[c.thread[r]] || "-") : "stream " + t.streams[c.stream[r]]];
    if (c.op) lines.push("operator " + (c.op[r] >= 0 ? t.operators[c.op[r]] : "-"));
    if (c.owner) lines.push("owner " + (c.owner[r] >= 0 ? t.owners[c.owner[r]] : "-"));
    if (c.access_first && !isNaN(c.access_first[r])) lines.push("accesses " + c.access_count[r] + ": first " + c.access_first[r] +
      " us, last " + c.access_last[r] + " us, longest gap " + c.access_gap[r] + " us");
    if (D.flags[r]) lines.push("flags " + flagText(r));
    document.getElementById("details").textContent = lines.concat([""], stackLines(c.stack[r])).join("\n");
    body.setAttribute("data-details-stack", dev.stacks.stacks[c.stack[r]] ? "yes" : "no");
    drawLifetime();
  }
  function showEvent(e) {
    var r = D.evBlock[e];
    var lines = ["event " + e + ": " + (D.evKind[e] >= 0 ? dev.actions[D.evKind[e]] : "other"), "address " + hex(eventAddr(e)),
      "size " + bytes(eventSize(e)), "allocated after it " + bytes(D.allocated[e]) + ", reserved " + bytes(D.reserved[e])];
    if (r >= 0) lines.push("block " + r);
    document.getElementById("details").textContent = lines.concat([""], stackLines(eventStack(e))).join("\n");
    body.setAttribute("data-details-stack", dev.stacks.stacks[eventStack(e)] ? "yes" : "no");
  }
  function switchTab(name) {
    if (name !== tab) sort = { key: null, dir: 1 };
    tab = name; tableSel = -1;
    var buttons = document.querySelectorAll(".tabs button");
    for (var i = 0; i < buttons.length; i++) buttons[i].className = buttons[i].getAttribute("data-tab") === name ? "on" : "";
    if (D) renderTable();
  }

  // ---- findings ------------------------------------------------------------------------
  function chooseFinding(k) {
    if (!findingItems.length) return;
    findingSel = (k + findingItems.length) % findingItems.length;
    findingItems.forEach(function (p, j) { p[0].classList.toggle("on", j === findingSel); });
    var f = findingItems[findingSel][1];
    highlight = f.blocks.length ? { ids: new Set(f.blocks) } : null;
    document.getElementById("clear-highlight").hidden = !highlight;
    body.setAttribute("data-highlighted", String(highlight ? highlight.ids.size : 0));
    if (highlight) { document.getElementById("in-range").checked = false; tab = "blocks"; }
    if (f.event !== null && f.event >= 0) focusEvent(f.event); else redraw();
    if (highlight) switchTab("blocks");
  }
  function clearHighlight() {
    highlight = null; findingSel = -1;
    findingItems.forEach(function (p) { p[0].classList.remove("on"); });
    document.getElementById("clear-highlight").hidden = true;
    body.setAttribute("data-highlighted", "0");
    redraw();
  }
  function focusEvent(e) {
    marker = e;
    var span = Math.max(Math.min(view.x1 - view.x0, dev.events / 4), 20);
    view.x0 = e - span / 2; view.x1 = e + span / 2; clampView();
    setCursor(e); redraw();
  }

  // ---- keys, zoom, wiring ----------------------------------------------------------------
  function onKey(ev) {
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test((ev.target && ev.target.tagName) || "");
    if (ev.key === "Escape") { if (typing) ev.target.blur(); clearHighlight(); return; }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "/") { ev.preventDefault(); document.getElementById("search").focus(); }
    else if (k === "j" || k === "ArrowDown") { ev.preventDefault(); selectRow(tableSel + 1, false); }
    else if (k === "k" || k === "ArrowUp") { ev.preventDefault(); selectRow(tableSel - 1, false); }
    else if (k === "ArrowLeft" || k === "ArrowRight") {
      ev.preventDefault();
      var step = ev.shiftKey ? Math.max(1, Math.round(dev.events / 100)) : 1;
      stepCursor(k === "ArrowLeft" ? -step : step);
    }
    else if (k === "Enter") selectRow(Math.max(tableSel, 0), true);
    else if (k === "n") chooseFinding(findingSel + 1);
    else if (k === "p") chooseFinding(findingSel - 1);
    else if (k === "+" || k === "=") zoom(0.5);
    else if (k === "-") zoom(2);
    else if (k === "0") { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); }
    else if (k >= "1" && k <= "5") switchTab(["blocks", "events", "sites", "leaked", "inefficient"][+k - 1]);
  }
  function redraw() {
    drawTimeline();
    if (!D) return;
    drawLifetime();
    if (document.getElementById("in-range").checked || highlight) renderTable();
  }
  function zoom(factor, centre) {
    var span = (view.x1 - view.x0) * factor, full = Math.max(dev.events, 1);
    span = Math.max(Math.min(span, full), Math.min(10, full));
    var c = centre === undefined ? (view.x0 + view.x1) / 2 : centre;
    var frac = (c - view.x0) / (view.x1 - view.x0);
    view.x0 = c - span * frac; view.x1 = view.x0 + span;
    clampView(); redraw();
  }
  function clampView() {
    var full = Math.max(dev.events, 1), span = Math.min(view.x1 - view.x0, full);
    if (view.x0 < 0) { view.x0 = 0; view.x1 = span; }
    if (view.x1 > full) { view.x1 = full; view.x0 = Math.max(0, full - span); }
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
        if (drag.moved) { view.x0 = drag.x0 - dx; view.x1 = drag.x1 - dx; clampView(); redraw(); }
      } else if (canvas.id === "timeline") hover(pxToX(ev.clientX - rect.left, rect.width));
    });
    canvas.addEventListener("dblclick", function () { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); });
  }
  function hover(x) {
    var e = Math.max(0, Math.min(dev.events - 1, Math.round(x)));
    if (!D) return;
    document.getElementById("hover").textContent = eventLabel(e) + ": allocated " + bytes(D.allocated[e]) +
      ", active " + bytes(D.active[e]) + ", reserved " + bytes(D.reserved[e]);
  }

  function selectDevice(i) {
    dev = DATA.devices[i]; D = null;
    view.x0 = 0; view.x1 = Math.max(dev.events, 1); marker = null; openRow = null;
    cursor = dev.ooms.length ? dev.ooms[0] : dev.peak.event;
    flameZoom = []; sort = { key: null, dir: 1 };
    body.setAttribute("data-device", String(dev.device));
    var summary = document.getElementById("summary");
    summary.textContent = "";
    summary.appendChild(el("span", "device " + dev.device));
    summary.appendChild(el("span", dev.events + " events, " + dev.blocks_total + " blocks"));
    summary.appendChild(el("span", "peak allocated " + bytes(dev.peak.bytes) + " at " + eventLabel(dev.peak.event) + (dev.peak.exact ? "" : " (a lower bound)")));
    summary.appendChild(el("span", dev.step_count + " steps (" + dev.step_source + ")"));
    if (dev.ooms.length) summary.appendChild(el("span", "out of memory at event " + dev.ooms.join(", "), "error"));
    var list = document.getElementById("findings");
    list.textContent = "";
    findingItems = []; findingSel = -1; highlight = null; tableSel = -1;
    DATA.findings.forEach(function (f) {
      if (f.device !== null && f.device !== dev.device) return;
      var item = el("li", f.text, f.severity === "info" ? "" : f.severity), k = findingItems.length;
      item.addEventListener("click", function () { chooseFinding(k); });
      findingItems.push([item, f]);
      list.appendChild(item);
    });
    setCursor(cursor);
    var drawn = drawTimeline();
    // let the browser finish the page and paint the timeline before the columns are decoded
    return afterPaint()
      .then(function () { return decodeDevice(dev); }).then(function (decoded) {
        D = decoded;
        performance.mark("derived");
        computeFlags();
        setCursor(cursor);
        drawn += drawLifetime();
        performance.mark("lifetime");
        drawFlame(); drawPool(); renderTable();
        performance.mark("tables");
        return drawn;
      });
  }

  function afterPaint() {
    return new Promise(function (go) {
      function next() { requestAnimationFrame(function () { setTimeout(go, 0); }); }
      if (document.readyState === "complete") next(); else window.addEventListener("load", next);
    });
  }

  function start() {
    var t0 = performance.now();
    document.getElementById("file").textContent = DATA.file + " (" + DATA.producer + ")";
    var select = document.getElementById("device");
    DATA.devices.forEach(function (d, i) { select.appendChild(el("option", "device " + d.device + " (" + d.events + " events)")); select.lastChild.value = i; });
    select.addEventListener("change", function () { selectDevice(+select.value); });
    document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5); });
    document.getElementById("zoom-out").addEventListener("click", function () { zoom(2); });
    document.getElementById("reset").addEventListener("click", function () { view.x0 = 0; view.x1 = Math.max(dev.events, 1); redraw(); });
    document.getElementById("step-back").addEventListener("click", function () { stepCursor(-1); });
    document.getElementById("step-next").addEventListener("click", function () { stepCursor(1); });
    document.getElementById("to-peak").addEventListener("click", function () { focusEvent(dev.peak.event); });
    ["search", "min-size", "max-size"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", function () { tableSel = -1; if (D) renderTable(); });
    });
    ["state-filter", "in-range"].forEach(function (id) {
      document.getElementById(id).addEventListener("change", function () { tableSel = -1; if (D) renderTable(); });
    });
    limits = {};
    ["lazy", "delayed", "idle"].forEach(function (name) {
      var input = document.getElementById(name), given = DATA.thresholds[name];
      limits[name] = { share: given.share, micros: given.micros };
      input.value = limitText(limits[name]);
      input.addEventListener("change", function () {
        var parsed = parseLimit(input.value);
        document.getElementById("threshold-note").textContent = parsed ? "" : "'" + input.value + "': give e.g. 50% or 2ms";
        if (!parsed) return;
        limits[name] = parsed;
        if (D) { computeFlags(); renderTable(); }
      });
    });
    var tabButtons = document.querySelectorAll(".tabs button");
    for (var tb = 0; tb < tabButtons.length; tb++) tabButtons[tb].addEventListener("click", function (ev) { switchTab(ev.target.getAttribute("data-tab")); });
    document.getElementById("clear-highlight").addEventListener("click", clearHighlight);
    document.addEventListener("keydown", onKey);
    bindOverview(); bindFlame();
    bindCanvas(document.getElementById("timeline"), function (px, py, w) { setCursor(pxToX(px, w)); });
    bindCanvas(document.getElementById("lifetime"), function (px, py) {
      for (var i = drawnBlocks.length - 1; i >= 0; i--) {
        var h = drawnBlocks[i];
        if (px >= h[0] && px <= h[0] + h[2] && py >= h[1] - 1 && py <= h[1] + h[3]) { showBlock(h[4]); return; }
      }
    });
    document.getElementById("pool").addEventListener("click", function (ev) {
      var rect = ev.target.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
      for (var i = poolBoxes.length - 1; i >= 0; i--) {
        var h = poolBoxes[i];
        if (px >= h[0] && px <= h[0] + h[2] && py >= h[1] && py <= h[1] + h[3]) { showBlock(h[4]); return; }
      }
    });
    window.addEventListener("resize", function () { if (dev) { redraw(); if (D) { drawFlame(); drawPool(); } } });

    // report.html#device=1&event=421 opens a device at an event; also search=, min=, state=,
    // tab=, sort=column:asc|desc, flame=view, finding=N, keys=... (for links and browser tests)
    var wanted = {}, text = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var parts = kv.split("=");
      if (parts.length === 2) { wanted[parts[0]] = +parts[1]; text[parts[0]] = decodeURIComponent(parts[1]); }
    });
    var first = DATA.start;
    DATA.devices.forEach(function (d, i) { if (d.device === wanted.device) first = i; });
    select.value = first;
    if (text.search !== undefined) document.getElementById("search").value = text.search;
    if (text.min !== undefined) document.getElementById("min-size").value = text.min;
    if (text.state !== undefined) document.getElementById("state-filter").value = text.state;
    if (text.search !== undefined || text.min !== undefined || text.state !== undefined) document.getElementById("in-range").checked = false;
    if (text.flame) { flameView = text.flame; document.getElementById("flame-view").value = text.flame; }
    ["lazy", "delayed", "idle"].forEach(function (name) {
      if (text[name] && parseLimit(text[name])) { limits[name] = parseLimit(text[name]); document.getElementById(name).value = text[name]; }
    });
    if (!DATA.devices.length) { finish(0, t0); return; }
    var ready = selectDevice(first);
    body.setAttribute("data-first-paint-ms", String(Math.round(performance.now())));
    ready.then(function (drawn) {
      if (wanted.event >= -1 && wanted.event < dev.events && text.event !== undefined) focusEvent(wanted.event);
      switchTab(text.tab || "blocks");
      if (text.sort) { var s = text.sort.split(":"); sort = { key: s[0], dir: s[1] === "asc" ? 1 : -1 }; renderTable(); }
      if (wanted.finding >= 0) chooseFinding(wanted.finding);
      (text.keys || "").split("").forEach(function (key) {
        var name = { d: "ArrowDown", u: "ArrowUp", e: "Enter", L: "ArrowLeft", R: "ArrowRight" }[key] || key;
        document.dispatchEvent(new KeyboardEvent("keydown", { key: name, bubbles: true }));
      });
      finish(drawn, t0);
    });
  }
  function finish(drawn, t0) {
    body.setAttribute("data-render", "ok");
    body.setAttribute("data-drawn", String(drawn));
    // navigation start to rendered (parse, decode, first draw, tables): read by the benchmark
    body.setAttribute("data-render-ms", String(Math.round(performance.now())));
    statusEl.textContent = "rendered " + drawn + " items in " + Math.round(performance.now() - t0) + " ms";
  }
  // A small handle for scripted use (tests, the benchmark): the same functions the clicks call.
  window.memoryReport = {
    sortBy: function (key) { sortTable(key); return +body.getAttribute("data-sort-ms"); },
    flame: function (viewName) { flameView = viewName || flameView; drawFlame(); return +body.getAttribute("data-flame-ms"); },
    setEvent: function (e) { setCursor(e); },
    poolAt: function (e) { var p = poolAt(e); return { reserved: p.reserved, free: p.free, largest: p.largest, segments: p.segments.length }; },
    allocatedAt: function (e) { return e < 0 ? dev.initial[0] : D.allocated[e]; },
    brush: brush
  };
  start();
})();

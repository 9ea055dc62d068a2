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

  // ---- wiring ----------------------------------------------------------------------------
  function redraw() { drawTimeline(); drawLifetime(); }

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
    DATA.findings.forEach(function (text) {
      var other = / device (\d+): /.exec(text);
      if (other && +other[1] !== dev.device) return;  // another device's finding
      var mark = null;
      (dev.marks || []).forEach(function (m) { if (text.indexOf(m.message) >= 0) mark = m; });
      var item = el("li", text, mark ? mark.severity : "");
      if (mark) item.addEventListener("click", function () { focusEvent(mark.event); });
      list.appendChild(item);
    });
    var drawn = drawTimeline() + drawLifetime() + drawPool();
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
  var wanted = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var parts = kv.split("="); if (parts.length === 2) wanted[parts[0]] = +parts[1];
  });
  var start = 0;
  DATA.devices.forEach(function (d, i) { if (d.device === wanted.device) start = i; });
  select.value = start;
  var drawn = DATA.devices.length ? selectDevice(start) : 0;
  if (dev && wanted.event >= 0 && wanted.event < dev.events) focusEvent(wanted.event);
  document.body.setAttribute("data-render", "ok");
  document.body.setAttribute("data-drawn", String(drawn));
  statusEl.textContent = "rendered " + drawn + " items";
})();

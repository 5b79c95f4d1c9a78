// netlatd report: the charts (after report.js, in the same script).
const W = 1120, PAD = { l: 74, r: 18, t: 12, b: 30 };
const PCT = [["p50", "#1d4ed8", ""], ["p99", "#111827", ""], ["p999", "#111827", "5 4"]];
// Count to colour: a ramp of our own from pale yellow to deep purple.
const RAMP = [[255, 247, 204], [253, 200, 90], [240, 120, 40], [190, 40, 70], [70, 12, 90]];

function ramp(f) {
  const x = Math.min(Math.max(f, 0), 1) * (RAMP.length - 1), i = Math.min(Math.floor(x), RAMP.length - 2);
  const a = RAMP[i], b = RAMP[i + 1], t = x - i;
  return "rgb(" + a.map((v, k) => Math.round(v + (b[k] - v) * t)).join(",") + ")";
}

function hover(svg, textOf) {
  let box = document.getElementById("tip");
  if (!box) { box = el("div", { id: "tip", role: "tooltip" }); box.hidden = true; document.body.append(box); }
  svg.addEventListener("mousemove", (e) => {
    const text = textOf(e.target);
    box.hidden = !text;
    if (!text) return;
    box.textContent = text;
    box.style.left = e.clientX + 14 + "px";
    box.style.top = e.clientY + 14 + "px";
  });
  svg.addEventListener("mouseleave", () => { box.hidden = true; });
}

function timeAxis(g, x0, x1, t0, t1, y) {
  const withDate = t1 - t0 > 86400e3;
  for (let i = 0; i <= 6; i++) {
    const t = t0 + ((t1 - t0) * i) / 6, x = x0 + ((x1 - x0) * i) / 6;
    g.append(sv("line", { x1: x, x2: x, y1: y, y2: y + 4, class: "tick" }));
    g.append(sv("text", { x: x, y: y + 16, class: "axis", "text-anchor": i === 0 ? "start" : i === 6 ? "end" : "middle" },
      fmtTime(t, withDate)));
  }
}

// Latency ticks at 1, 10, 100... ns (and 2, 5 between when the range is short).
function latencyTicks(lo, hi) {
  const out = [];
  for (let p = 1; p <= 1e12; p *= 10)
    for (const k of hi / lo < 30 ? [1, 2, 5] : [1])
      if (p * k >= lo && p * k <= hi) out.push(p * k);
  return out;
}

function drawHeatmap(h, cols, sec) {
  const H = 210, x0 = PAD.l, x1 = W - PAD.r, y0 = PAD.t, y1 = PAD.t + H;
  const svg = sv("svg", { viewBox: "0 0 " + W + " " + (y1 + PAD.b), class: "chart", "data-chart": "heatmap",
    "data-stage": h.stage, "data-cells": h.cells.length, "data-columns": cols.length });
  const t0 = cols[0][0], t1 = cols[cols.length - 1][1], tx = (t) => x0 + ((t - t0) / Math.max(t1 - t0, 1)) * (x1 - x0);
  const lo = Math.max(h.rows[0][0], 0.5), hi = h.rows[h.rows.length - 1][1];
  const ly = (v) => y1 - ((Math.log2(Math.max(v, 0.5)) - Math.log2(lo)) / Math.max(Math.log2(hi / lo), 1e-9)) * H;
  svg.append(sv("rect", { x: x0, y: y0, width: x1 - x0, height: H, class: "plot" }));
  for (const v of latencyTicks(lo, hi)) {
    svg.append(sv("line", { x1: x0, x2: x1, y1: ly(v), y2: ly(v), class: "grid" }));
    svg.append(sv("text", { x: x0 - 6, y: ly(v) + 4, class: "axis", "text-anchor": "end" }, fmtNs(v)));
  }
  const max = h.cells.reduce((a, c) => Math.max(a, c[2]), 1);
  for (const [c, r, n] of h.cells) {
    const row = h.rows[r - h.row_min], xa = tx(cols[c][0]), xb = tx(cols[c][1]);
    svg.append(sv("rect", { x: xa, y: ly(row[1]), width: Math.max(xb - xa, 1), height: Math.max(ly(row[0]) - ly(row[1]), 1),
      fill: ramp(Math.log1p(n) / Math.log1p(max)), class: "cell", "data-col": c, "data-row": r, "data-count": n }));
  }
  // One tooltip for all cells (a <title> each doubled the nodes to draw).
  hover(svg, (t) => {
    if (!t.classList.contains("cell")) return null;
    const c = +t.dataset.col, row = h.rows[t.dataset.row - h.row_min];
    return fmtInt(+t.dataset.count) + " packets in " + fmtNs(row[0]) + " – " + fmtNs(row[1]) + ", " +
      fmtTime(cols[c][0], true) + " – " + fmtTime(cols[c][1]) + " UTC";
  });
  for (const [name, color, dash] of PCT) {
    let d = "", pts = 0, pen = "M";
    h[name].forEach((v, c) => {
      if (v === null) { pen = "M"; return; }
      const xm = (tx(cols[c][0]) + tx(cols[c][1])) / 2;
      d += pen + xm.toFixed(1) + "," + ly(v).toFixed(1) + " "; pen = "L"; pts++;
    });
    svg.append(sv("path", { d: d, class: "halo" }));
    svg.append(sv("path", { d: d, stroke: color, "stroke-dasharray": dash, class: "pline", "data-series": name,
      "data-points": pts, "data-values": h[name].map((v) => (v === null ? "" : v)).join(",") }));
  }
  timeAxis(svg, x0, x1, t0, t1, y1);
  sec.append(svg);
}

function legendRow(items) {
  const p = el("div", { class: "legend" });
  for (const [label, color, dash] of items) {
    const s = el("span", { class: dash ? "key dashed" : "key" }); s.style.borderColor = color; s.style.background = dash === "box" ? color : "";
    p.append(el("span", { class: "item" }, s, label));
  }
  return p;
}

function drawHeatmaps(m) {
  const sec = section("stages", "Latency per stage over time",
    "Each column is a stretch of time, each row a latency range (log scale); the colour is how many packets fell there. " +
    "Lines: p50, p99 and p999 of each column.");
  const scale = el("span", { class: "ramp" });
  scale.style.background = "linear-gradient(to right," + [0, 0.25, 0.5, 0.75, 1].map(ramp).join(",") + ")";
  const lg = legendRow(PCT.map(([n, c, d]) => [n, c, d ? "dash" : ""]));
  lg.append(el("span", { class: "item" }, "fewer ", scale, " more packets"));
  sec.append(lg);
  // total first: the whole path, then its stages in path order.
  for (const h of m.heatmaps.filter((x) => x.stage === "total").concat(m.heatmaps.filter((x) => x.stage !== "total"))) {
    const o = h.overall || {}, head = el("h3", {}, h.stage);
    const sw = el("span", { class: "swatch" }); sw.style.background = STAGE_COLOR[h.stage]; head.prepend(sw);
    const fig = el("figure", { class: "stage", id: "stage-" + h.stage }, head);
    if (!h.applicable) { fig.append(el("p", { class: "na" }, "Not applicable: " + (h.why_not || "no hook"))); sec.append(fig); continue; }
    fig.append(el("p", { class: "sub" }, STAGE_TEXT[h.stage] + " · " + fmtInt(h.count) + " packets" +
      (h.count ? " · over the span p50 " + fmtNs(o.p50) + ", p99 " + fmtNs(o.p99) + ", p999 " + fmtNs(o.p999) + ", max " + fmtNs(o.max) : "")));
    if (h.cells.length) drawHeatmap(h, m.columns, fig); else fig.append(el("p", { class: "na" }, "No packet had this stage."));
    sec.append(fig);
  }
}

function drawShares(m) {
  const sec = section("shares", "Where the time goes",
    "Each stage's share of the time in total, summed over every packet of the series (from the breakdown). " +
    "Grey: time in total no stage holds (packets with a stamp missing).");
  const stages = ["irq", "softirq", "netif_receive", "sock_queue", "oncpu"];
  sec.append(legendRow(stages.concat(["rest"]).map((s) => [s === "rest" ? "not split" : s, STAGE_COLOR[s], "box"])));
  const rowH = 34, lw = 190, bw = W - lw - 150;
  const svg = sv("svg", { viewBox: "0 0 " + W + " " + (m.shares.length * rowH + 8), class: "chart", "data-chart": "shares",
    "data-series-count": m.shares.length });
  m.shares.forEach((s, i) => {
    const g = sv("g", { class: "series", "data-series": s.series, transform: "translate(0," + (i * rowH + 4) + ")" });
    const name = s.series.length > 26 ? s.series.slice(0, 25) + "…" : s.series;
    g.append(tip(sv("text", { x: lw - 10, y: 15, class: "label", "text-anchor": "end" }, name), s.series));
    g.append(sv("text", { x: lw - 10, y: 28, class: "axis", "text-anchor": "end" }, fmtInt(s.packets) + " packets"));
    let x = lw;
    for (const p of s.parts.concat(s.rest > 0.005 ? [{ stage: "rest", share: s.rest }] : [])) {
      const w = Math.max(Math.min(p.share, 1) * bw, 0);
      const r = sv("rect", { x: x, y: 3, width: w, height: 24, fill: STAGE_COLOR[p.stage], class: "part",
        "data-stage": p.stage, "data-share": p.share.toFixed(4) });
      g.append(tip(r, p.stage + ": " + (100 * p.share).toFixed(1) + " % of total" + (p.mean_ns ? ", mean " + fmtNs(p.mean_ns) : "")));
      const label = p.stage + " " + (100 * p.share).toFixed(0) + "%";
      if (w > label.length * 7 + 8) g.append(sv("text", { x: x + 5, y: 19, class: "inbar" }, label));
      x += w;
    }
    g.append(sv("text", { x: lw + bw + 10, y: 19, class: "label" }, "total mean " + fmtNs(s.total_mean_ns)));
    svg.append(g);
  });
  sec.append(svg);
}

function drawLosses(m) {
  const sec = section("losses", "Losses", "What netlatd counted instead of measuring, by reason, per time column: " +
    "drops (stack_dropped is the network's, the rest netlatd's own) and records or reads it could not tie whole.");
  const all = m.losses.reasons, shown = all.filter((r) => r.total > 0), cols = m.columns;
  const palette = ["#d1495b", "#e39b2d", "#3b82c4", "#1f9e89", "#8e6bbf", "#6b7280", "#b07aa1", "#edae49", "#00798c", "#30638e"];
  const H = 150, x0 = PAD.l, x1 = W - PAD.r, y1 = PAD.t + H;
  const svg = sv("svg", { viewBox: "0 0 " + W + " " + (y1 + PAD.b), class: "chart", "data-chart": "losses",
    "data-reasons": shown.map((r) => r.name).join(",") });
  if (!shown.length) sec.append(el("p", { class: "ok" }, "Nothing lost: every reason counted 0 over the span."));
  else {
    sec.append(legendRow(shown.map((r, i) => [r.name + " (" + fmtInt(r.total) + ")", palette[i % palette.length], "box"])));
    const t0 = cols[0][0], t1 = cols[cols.length - 1][1], tx = (t) => x0 + ((t - t0) / Math.max(t1 - t0, 1)) * (x1 - x0);
    const stack = cols.map((_, c) => shown.reduce((a, r) => a + r.per_column[c], 0)), max = Math.max(...stack, 1);
    svg.append(sv("rect", { x: x0, y: PAD.t, width: x1 - x0, height: H, class: "plot" }));
    for (const f of [0, 0.5, 1]) {
      const y = y1 - f * H;
      svg.append(sv("line", { x1: x0, x2: x1, y1: y, y2: y, class: "grid" }));
      svg.append(sv("text", { x: x0 - 6, y: y + 4, class: "axis", "text-anchor": "end" }, fmtInt(Math.round(f * max))));
    }
    cols.forEach((col, c) => {
      let y = y1;
      shown.forEach((r, i) => {
        const n = r.per_column[c], h = (n / max) * H;
        if (!n) return;
        const xa = tx(col[0]), rect = sv("rect", { x: xa, y: y - h, width: Math.max(tx(col[1]) - xa - 0.5, 1), height: h,
          fill: palette[i % palette.length], class: "loss", "data-reason": r.name, "data-col": c, "data-count": n });
        svg.append(tip(rect, fmtInt(n) + " " + r.name + ", " + fmtTime(col[0], true) + " – " + fmtTime(col[1]) + " UTC"));
        y -= h;
      });
    });
    timeAxis(svg, x0, x1, t0, t1, y1);
    sec.append(svg);
  }
  const t = el("table", { class: "losses", "data-table": "losses" }, el("tr", {}, el("th", {}, "reason"), el("th", {}, "kind"), el("th", {}, "total")));
  for (const r of all.slice().sort((a, b) => b.total - a.total))
    t.append(el("tr", { class: r.total ? "" : "zero" }, el("td", {}, el("code", {}, r.name)), el("td", {}, r.kind), el("td", { class: "num" }, fmtInt(r.total))));
  sec.append(el("details", {}, el("summary", {}, "Every reason (" + all.length + ")"), t));
}

function packetText(w) {
  const q = (v) => (v === null || v === undefined ? "?" : v);
  const who = w.reader ? "reader " + (w.reader.comm || "?") + " (pid " + q(w.reader.pid) + ", tid " + q(w.reader.tid) + ") on CPU " +
    q(w.reader.cpu) + (w.reader.woken ? ", woken by the socket" + (w.reader.slept_in_call ? " in its call" : "") : "")
    : "reader unknown (" + w.reader_unknown + ")";
  return w.proto + " " + w.family + " :" + w.sport + " → :" + w.dport + ", " + fmtInt(w.len) + " B on " + w.iface +
    " · received on CPU " + q(w.rx_cpu) + (w.ksoftirqd ? " (in ksoftirqd)" : "") + " · " + who;
}

function drawWaterfall(w, rank) {
  const rowH = 22, lw = 110, x0 = lw, x1 = W - 150, top = 40;
  const end = Math.max(...w.bars.map((b) => b.start_ns + b.dur_ns), ...w.marks.map((k) => k.at_ns), 1);
  const sx = (ns) => x0 + (Math.max(ns, 0) / end) * (x1 - x0);
  const svg = sv("svg", { viewBox: "0 0 " + W + " " + (top + w.bars.length * rowH + 26), class: "chart",
    "data-chart": "waterfall", "data-rank": rank, "data-bars": w.bars.length });
  // Mark labels in up to three rows, so that close instants do not overprint.
  const ends = [-1e9, -1e9, -1e9];
  for (const k of w.marks.filter((k) => k.at_ns >= 0).sort((a, b) => a.at_ns - b.at_ns)) {
    const x = sx(k.at_ns), half = k.stamp.length * 3 + 4;
    let r = ends.findIndex((e) => x - half > e);
    if (r < 0) r = 2;
    ends[r] = x + half;
    svg.append(sv("line", { x1: x, x2: x, y1: top - 4 - 11 * r, y2: top + w.bars.length * rowH, class: "mark", "data-stamp": k.stamp }));
    svg.append(sv("text", { x: x, y: top - 7 - 11 * r, class: "marklabel", "text-anchor": "middle" }, k.stamp));
  }
  w.bars.forEach((b, i) => {
    const y = top + i * rowH, xa = sx(b.start_ns), bwid = Math.max(sx(b.start_ns + b.dur_ns) - xa, 2);
    svg.append(sv("text", { x: lw - 8, y: y + 15, class: "label", "text-anchor": "end" }, b.stage));
    svg.append(tip(sv("rect", { x: xa, y: y + 3, width: bwid, height: rowH - 6, fill: STAGE_COLOR[b.stage] || "#999", class: "bar",
      "data-stage": b.stage, "data-start-ns": b.start_ns, "data-dur-ns": b.dur_ns }), b.stage + " " + fmtNs(b.dur_ns) + " from +" + fmtNs(b.start_ns)));
    const label = b.stage + " " + fmtNs(b.dur_ns), inside = bwid > label.length * 7 + 10;
    svg.append(sv("text", { x: inside ? xa + 5 : xa + bwid + 5, y: y + 15, class: inside ? "inbar bar-label" : "label bar-label" }, label));
  });
  const axisY = top + w.bars.length * rowH + 4;
  for (let i = 0; i <= 4; i++)
    svg.append(sv("text", { x: x0 + ((x1 - x0) * i) / 4, y: axisY + 12, class: "axis", "text-anchor": i ? "middle" : "start" }, "+" + fmtNs((end * i) / 4)));
  return svg;
}

function drawWaterfalls(m) {
  const sec = section("slowest", "The slowest packets", "Each packet's stages from its outlier line, on its own time scale from its " +
    "first stamp; marks: the reader's wake-up, switch-in, call start, copy and the call's return.");
  if (!m.waterfalls.length) sec.append(el("p", { class: "na" }, "No outlier line with a total in the input (netlatd --outliers-over writes them)."));
  m.waterfalls.forEach((w, i) => {
    const call = w.marks.find((k) => k.stamp === "call_start" && k.at_ns < 0);
    const card = el("figure", { class: "packet", "data-rank": i + 1, "data-total-ns": w.total_ns },
      el("h3", {}, "#" + (i + 1) + " · total " + fmtNs(w.total_ns) + " · " + fmtTime(w.time_ms, true) + "." +
        String(w.time_ms % 1000).padStart(3, "0") + " UTC"),
      el("p", { class: "sub" }, packetText(w) + (call ? " · its call began " + fmtNs(-call.at_ns) + " before the packet" : "")));
    card.append(drawWaterfall(w, i + 1));
    sec.append(card);
  });
}

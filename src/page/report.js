// netlatd report: draws the page from the JSON in #netlatd-data (the model
// `netlatd report` computed). Text goes in with textContent only: a field's
// value is never markup. Each chart carries data-* attributes that say what
// it drew (tests/page/ reads them back).
"use strict";
const NL = { errors: 0 };
function noteError() { NL.errors++; document.body.dataset.renderErrors = NL.errors; }
window.addEventListener("error", noteError);
const consoleError = console.error;
console.error = (...args) => { noteError(); consoleError(...args); };

const SVGNS = "http://www.w3.org/2000/svg";
const STAGE_COLOR = {
  total: "#6b7280", irq: "#8e6bbf", softirq: "#3b82c4", netif_receive: "#1f9e89",
  sock_queue: "#e39b2d", oncpu: "#d1495b", in_socket: "#b07aa1", rest: "#d4d4d8",
};
const STAGE_TEXT = {
  irq: "NIC hard IRQ until the NET_RX softirq starts",
  softirq: "NET_RX softirq start until netif_receive_skb (driver poll, GRO)",
  netif_receive: "netif_receive_skb until queued on the socket (IP, UDP/TCP)",
  sock_queue: "queued on the socket until the read runs (wakeup, run queue, application busy)",
  oncpu: "the read running until it returns the data (syscall, copy)",
  in_socket: "queued on the socket until the read returns (sock_queue + oncpu)",
  total: "first kernel stamp until the receive call returns",
};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}
function sv(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function tip(node, text) { node.append(sv("title", {}, text)); return node; }

function sig(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }
function fmtNs(ns) {
  if (ns === null || ns === undefined) return "–";
  const a = Math.abs(ns);
  if (a < 1e3) return Math.round(ns) + " ns";
  if (a < 1e6) return sig(ns / 1e3) + " µs";
  if (a < 1e9) return sig(ns / 1e6) + " ms";
  return sig(ns / 1e9) + " s";
}
function fmtInt(n) { return Number(n).toLocaleString("en-US"); }
function fmtTime(ms, withDate) {
  const s = new Date(ms).toISOString();
  return withDate ? s.slice(0, 19).replace("T", " ") : s.slice(11, 19);
}
function fmtSpan(ms) {
  const s = ms / 1000;
  if (s < 120) return sig(s) + " s";
  if (s < 7200) return sig(s / 60) + " min";
  return sig(s / 3600) + " h";
}

function section(id, title, intro) {
  const s = el("section", { id: id }, el("h2", {}, title));
  if (intro) s.append(el("p", { class: "intro" }, intro));
  document.getElementById("page").append(s);
  return s;
}

// docs/OUTPUT.md, Coverage: the text view's threshold (kCoverageLowBelow).
const COVERAGE_LOW_BELOW_PERCENT = 95;

// The lines' coverage counts summed: the share of the matching packets in
// the histograms, rounded down, so that a share short of whole never shows
// as 100 %.
function fmtCoverage(c) {
  if (c.matching === 0) return "no packets matched";
  const tenths = c.recorded >= c.matching ? 1000 : Math.floor(c.recorded * 1000 / c.matching);
  return (tenths / 10).toFixed(1) + " % of " + fmtInt(c.matching) + " matching packets in the histograms" +
    (tenths < COVERAGE_LOW_BELOW_PERCENT * 10 ? ": the histograms stand for part of the traffic only" : "");
}

function drawHeader(m) {
  const h = m.header, inp = m.input;
  const span = h.first_ms !== null ? fmtTime(h.first_ms, true) + " – " + fmtTime(h.last_ms, true) +
    " UTC (" + fmtSpan(h.last_ms - h.first_ms) + ")" : "–";
  const facts = [
    ["host", h.hosts.join(", ") || "–"], ["interface", h.ifaces.join(", ") || "–"],
    ["ports", h.ports.join(", ") || "–"], ["kernel", h.kernels.join(", ") || "–"],
    ["netlatd", h.versions.join(", ") || "–"],
    ["lines", fmtInt(inp.intervals) + " interval, " + fmtInt(inp.outliers) + " outlier"], ["time span", span],
  ];
  const low = h.coverage && h.coverage.matching > 0 &&
    h.coverage.recorded * 100 < h.coverage.matching * COVERAGE_LOW_BELOW_PERCENT;
  if (h.coverage) facts.push(["coverage", fmtCoverage(h.coverage)]);
  const dl = el("dl", { class: "facts" });
  for (const [k, v] of facts) {
    const cls = k === "time span" || k === "coverage" ? "wide" + (k === "coverage" && low ? " warn" : "") : "";
    dl.append(el("div", { class: cls, "data-fact": k }, el("dt", {}, k), el("dd", {}, v)));
  }
  const head = el("header", {}, el("h1", {}, "netlatd report"), dl);
  const hooks = el("table", { class: "hooks", "data-table": "hooks" },
    el("tr", {}, el("th", {}, "stage"), el("th", {}, "measured from → to (hooks chosen at start)")));
  for (const s of h.hooks) {
    const what = s.applicable ? s.hooks.join("; later: ") : "not applicable: " + s.why_not;
    const sw = el("span", { class: "swatch" }); sw.style.background = STAGE_COLOR[s.stage];
    hooks.append(el("tr", { class: s.applicable ? "" : "na" }, el("td", {}, sw, s.stage), el("td", {}, what)));
  }
  if (h.hooks.length) head.append(el("details", {}, el("summary", {}, "Hooks per stage"), hooks));
  document.getElementById("page").append(head);
}

// What was read, what was left out, and what the page merged to stay small.
function drawNotes(m) {
  const inp = m.input, d = m.downsample, box = el("div", { class: "notes", id: "input-notes" });
  const files = inp.sources.length === 1 ? inp.sources[0].name :
    inp.sources.map((s) => s.name + " (" + fmtInt(s.lines) + " lines)").join(", ");
  box.append(el("p", {}, "Read " + fmtInt(inp.lines) + " lines from " + files + "; schema " + inp.schema + "."));
  const skip = el("p", { "data-skipped": inp.skipped, class: inp.skipped ? "warn" : "" },
    inp.skipped ? fmtInt(inp.skipped) + (inp.skipped === 1 ? " line" : " lines") + " skipped (not netlatd's schema-" + inp.schema + " lines): " :
      "No line skipped.");
  if (inp.skipped) {
    const ul = el("ul", {});
    for (const s of inp.skips) ul.append(el("li", {}, fmtInt(s.count) + " × " + s.reason + " (first at " + s.first + ")"));
    skip.append(ul);
  }
  box.append(skip);
  const unk = el("p", { "data-unknown": inp.unknown.length, class: inp.unknown.length ? "warn" : "" },
    inp.unknown.length ? "Fields this page does not know (a newer netlatd?), shown nowhere: " :
      "Every field is one this page knows.");
  if (inp.unknown.length) {
    const ul = el("ul", {});
    for (const u of inp.unknown) ul.append(el("li", {}, el("code", {}, u.field), " in " + fmtInt(u.lines) + " lines"));
    unk.append(ul);
  }
  box.append(unk);
  const merged = [];
  if (inp.intervals > d.columns)
    merged.push(fmtInt(inp.intervals) + " intervals are merged into " + d.columns + " time columns (at most " +
      d.max_columns + "); a column's percentiles are those of its intervals' buckets merged exactly");
  merged.push("latency rows are " + d.rows_per_octave + " per power of two (netlatd's buckets, 64 per power of two, merged)");
  if (inp.outliers_ranked > d.waterfalls)
    merged.push("the " + d.waterfalls + " slowest of " + fmtInt(inp.outliers_ranked) + " outlier packets are drawn");
  if (d.series > d.max_series) merged.push("the " + d.max_series + " busiest of " + d.series + " breakdown series are shown");
  box.append(el("p", { id: "downsampled", "data-columns": d.columns }, "Downsampled: " + merged.join("; ") + "."));
  document.getElementById("page").append(box);
}

function main() {
  const t0 = performance.now();
  const m = JSON.parse(document.getElementById("netlatd-data").textContent);
  document.body.dataset.renderErrors = 0;
  drawHeader(m);
  drawNotes(m);
  drawShares(m);
  drawHeatmaps(m);
  drawLosses(m);
  drawWaterfalls(m);
  document.body.dataset.rendered = "yes";
  document.body.dataset.drawMs = Math.round(performance.now() - t0);  // for a person; no test reads it
}
window.addEventListener("DOMContentLoaded", () => {
  try { main(); } catch (e) {
    noteError();
    document.getElementById("page").append(el("p", { class: "warn" }, "This page failed to draw: " + e));
    throw e;
  }
});

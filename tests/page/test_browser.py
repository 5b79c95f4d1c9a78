#!/usr/bin/env python3
"""netlatd report in a real browser: headless Chromium (Debian's `chromium`)
opens the page made from tests/unit/fixtures/page/golden.jsonl, and the DOM it
drew is held against what that input must show: each chart's series and
points, the skipped lines, the slowest packets' bars and labels. Any console
message fails it (the page writes none). A screenshot is left in OUT_DIR.

    test_browser.py NETLATD_BINARY GOLDEN_INPUT OUT_DIR

Exit 0 passed, 1 failed (each failed check on a line), 77 skipped (no
chromium: scripts/install-deps.sh installs it). The verdict reads the DOM
after the load event; the page draws synchronously before it, so it does not
depend on timing."""
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
failures = []


def check(ok, what, got=None):
    if not ok:
        failures.append(what + ("" if got is None else ": got " + repr(got)))


class Dom(html.parser.HTMLParser):
    """Every element as (tag, attrs, text inside it), in document order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.open = [], []

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [p["tag"] + ":" + p["attrs"].get("class", "")
                                                                        for p in self.open], "kids": []}
        for p in self.open:
            p["kids"].append(e)
        self.elements.append(e)
        if tag not in ("meta", "br", "img", "input", "link"):
            self.open.append(e)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if self.open and self.open[-1]["tag"] == tag:
            self.open.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i]["tag"] == tag:
                del self.open[i:]
                break

    def handle_data(self, data):
        for e in self.open:
            e["text"] += data

    def find(self, tag=None, root=None, **attrs):
        pool = root["kids"] if root else self.elements
        return [e for e in pool if (tag is None or e["tag"] == tag) and
                all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())]


def chromium(binary, profile, *args):
    return subprocess.run([binary] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + list(args),
                          capture_output=True, text=True, timeout=180)


def check_heatmaps(dom):
    for stage in ("softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"):
        svg = dom.find("svg", data_chart="heatmap", data_stage=stage)
        check(len(svg) == 1, "one heatmap for " + stage, len(svg))
        if svg:
            check(svg[0]["attrs"].get("data-columns") == "3", stage + ": 3 columns", svg[0]["attrs"].get("data-columns"))
            lines = [p["attrs"].get("data-series") for p in dom.find("path", root=svg[0]) if "data-series" in p["attrs"]]
            check(lines == ["p50", "p99", "p999"], stage + ": p50, p99, p999 lines", lines)
    check(not dom.find("svg", data_chart="heatmap", data_stage="irq"), "no heatmap for irq on lo")
    irq = dom.find("figure", id="stage-irq")
    check(irq and "Not applicable" in irq[0]["text"], "irq says why it does not apply")
    total = dom.find("svg", data_chart="heatmap", data_stage="total")[0]
    cells = [(c["attrs"]["data-col"], c["attrs"]["data-row"], c["attrs"]["data-count"])
             for c in dom.find("rect", root=total) if c["attrs"].get("class") == "cell"]
    check(len(cells) == 9, "total: 9 cells", len(cells))
    check(cells[:3] == [("0", "39", "1"), ("0", "40", "2"), ("0", "41", "1")], "total: column 0's cells", cells[:3])
    want = {"p50": "20863,24703,18830", "p99": "25842,2309910,19350", "p999": "25842,2309910,19350"}
    for p in dom.find("path", root=total):
        name = p["attrs"].get("data-series")
        if name:
            check(p["attrs"].get("data-values") == want[name], "total: " + name + " per column", p["attrs"].get("data-values"))
            check(p["attrs"].get("data-points") == "3", "total: " + name + " has 3 points", p["attrs"].get("data-points"))
            check(p["attrs"].get("d", "").count("L") == 2, "total: " + name + " drawn through 3 points", p["attrs"].get("d"))


def check_shares_losses(dom):
    svg = dom.find("svg", data_chart="shares")
    check(len(svg) == 1 and svg[0]["attrs"].get("data-series-count") == "2", "shares: 2 series")
    udp = dom.find("g", data_series="5000/udp")
    parts = [(r["attrs"]["data-stage"], r["attrs"]["data-share"]) for r in dom.find("rect", root=udp[0])] if udp else []
    check(parts == [("softirq", "0.0062"), ("netif_receive", "0.0128"), ("sock_queue", "0.9707"), ("oncpu", "0.0098")],
          "shares: 5000/udp's parts", parts)
    losses = dom.find("svg", data_chart="losses")
    reasons = losses[0]["attrs"].get("data-reasons") if losses else None
    check(reasons == "ringbuf_full,stack_dropped,ambiguous_reads,reader_unknown,new_reason", "losses: reasons drawn", reasons)
    bars = sorted((r["attrs"]["data-reason"], r["attrs"]["data-col"], r["attrs"]["data-count"])
                  for r in dom.find("rect", root=losses[0]) if r["attrs"].get("class") == "loss") if losses else []
    check(bars == [("ambiguous_reads", "1", "1"), ("new_reason", "2", "3"), ("reader_unknown", "1", "1"),
                   ("ringbuf_full", "1", "2"), ("stack_dropped", "0", "1")], "losses: bars per column", bars)


def check_waterfalls(dom):
    packets = dom.find("figure", **{"class": "packet"})
    check(len(packets) == 2, "2 waterfalls (the packet-only record has no total)", len(packets))
    if len(packets) != 2:
        return
    first, second = packets
    check(first["attrs"].get("data-total-ns") == "2314900", "slowest first", first["attrs"].get("data-total-ns"))
    bars = [(b["attrs"]["data-stage"], b["attrs"]["data-start-ns"], b["attrs"]["data-dur-ns"])
            for b in dom.find("rect", root=first) if b["attrs"].get("class") == "bar"]
    check(bars == [("total", "0", "2314900"), ("irq", "0", "2100"), ("softirq", "2100", "3200"),
                   ("netif_receive", "5300", "4500"), ("sock_queue", "9800", "2300600"), ("oncpu", "2310400", "4500")],
          "waterfall #1: bars at their offsets", bars)
    labels = [t["text"] for t in dom.find("text", root=first) if "bar-label" in t["attrs"].get("class", "")]
    check(labels == ["total 2.31 ms", "irq 2.10 µs", "softirq 3.20 µs", "netif_receive 4.50 µs", "sock_queue 2.30 ms",
                     "oncpu 4.50 µs"], "waterfall #1: each bar labelled with stage and duration", labels)
    sub = first["text"]
    for want in ("reader collector (pid 812, tid 815) on CPU 0", "received on CPU 1", "began 1.50 ms before"):
        check(want in sub, "waterfall #1 names " + repr(want), sub)
    check("reader </script><b>x (pid 812" in second["text"], "a reader's name is text, not markup", second["text"][:200])
    check(not dom.find("b"), "no element made from a field's value")


def main():
    netlatd, golden, out = sys.argv[1:4]
    browser = os.environ.get("NETLATD_CHROMIUM") or shutil.which("chromium")
    if not browser:
        print("SKIPPED: no chromium here (scripts/install-deps.sh installs Debian's chromium package)")
        return 77
    os.makedirs(out, exist_ok=True)
    page = os.path.join(out, "report.html")
    made = subprocess.run([netlatd, "report", "-o", page, golden], capture_output=True, text=True)
    if made.returncode != 0:
        print("netlatd report failed:", made.returncode, made.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="netlatd-chromium-") as profile:
        run = chromium(browser, os.path.join(profile, "dom"), "--dump-dom", "file://" + os.path.abspath(page))
        shot = chromium(browser, os.path.join(profile, "shot"), "--window-size=1280,3600",
                        "--screenshot=" + os.path.join(out, "report.png"), "file://" + os.path.abspath(page))
    dom = Dom()
    dom.feed(run.stdout)
    body = dom.find("body")
    check(run.returncode == 0, "chromium --dump-dom exits 0", run.returncode)
    check(body and body[0]["attrs"].get("data-rendered") == "yes", "the page drew to its end")
    check(body and body[0]["attrs"].get("data-render-errors") == "0", "no error while drawing",
          body and body[0]["attrs"].get("data-render-errors"))
    console = [l for l in run.stderr.splitlines() + shot.stderr.splitlines() if ":CONSOLE" in l]
    check(not console, "no console message", console[:5])
    notes = dom.find("p", data_skipped="3")
    check(len(notes) == 1 and "not JSON" in notes[0]["text"], "3 skipped lines counted, with their reasons")
    check(len(dom.find("p", data_unknown="2")) == 1, "2 unknown fields named")
    check(any("interval.future_field" in c["text"] for c in dom.find("code")), "the unknown field by name")
    check_heatmaps(dom)
    check_shares_losses(dom)
    check_waterfalls(dom)
    png = os.path.join(out, "report.png")
    check(shot.returncode == 0 and os.path.exists(png) and os.path.getsize(png) > 10000, "a screenshot saved", png)
    for f in failures:
        print("FAILED:", f)
    print("browser: %d checks failed; page %s, screenshot %s" % (len(failures), page, png))
    return 1 if failures else 0


sys.exit(main())

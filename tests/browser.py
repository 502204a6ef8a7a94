"""Headless Chromium for the book tests: serve a built site on 127.0.0.1, screenshot pages, measure tables."""
from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_TIMEOUT_S = 120
MISSING = "/usr/bin/chromium is not installed (apt-get install chromium; .ci/run installs it)"

#: A same-origin page that loads ``?page=URL`` in an iframe of ``&width=W`` px and writes, into its own DOM, the
#: tables wider than their box or the screen (each marked with whether a sideways-scrolling box holds it), the
#: claims tables' columns narrower than 12 characters of their font, the cells that clip their text, the page's
#: width and height (folded sections closed); the lowest contrast of a claim id against its background in the light
#: and the dark theme; then, every fold opened but the code cells' (hidden inputs): the page's height, the table rows
#: over 600 px, raw Markdown table syntax in the visible text, and the claims tables' verdict cells not visible
#: without scrolling sideways.
PROBE = r"""<!doctype html><html><body><pre id="result">pending</pre>
<script>
const q = new URLSearchParams(location.search);
const frame = document.createElement("iframe");
frame.style.width = q.get("width") + "px"; frame.style.height = "900px"; frame.style.border = "0";
frame.src = q.get("page");
frame.onload = () => setTimeout(() => {
  const doc = frame.contentDocument, win = frame.contentWindow;
  const scrolls = (el) => { for (; el && el !== doc.body; el = el.parentElement) {
      const o = win.getComputedStyle(el).overflowX; if (o === "auto" || o === "scroll") return true; }
    return false; };
  const cut = [];
  doc.querySelectorAll("table").forEach((t, i) => {
    const right = t.getBoundingClientRect().right, parent = t.parentElement.getBoundingClientRect().right;
    const wide = t.scrollWidth > t.clientWidth + 1 || right > parent + 1 || right > doc.documentElement.clientWidth + 1;
    if (wide) cut.push({table: i, cls: t.className, right: Math.round(right), in_scroll_box: scrolls(t)});
  });
  const narrow = [], cells = [];
  doc.querySelectorAll("table.corekit-claims").forEach((t, i) => {
    const ruler = doc.createElement("span");
    ruler.textContent = "0".repeat(12); ruler.style.visibility = "hidden"; ruler.style.whiteSpace = "nowrap";
    t.querySelector("td, th").appendChild(ruler);
    const twelve = ruler.getBoundingClientRect().width; ruler.remove();
    t.querySelectorAll("thead th").forEach((th) => {
      if (th.offsetParent !== null && th.getBoundingClientRect().width < twelve)   // a phone's cards hide the head
        narrow.push({table: i, column: th.textContent.trim(), px: Math.round(th.getBoundingClientRect().width),
                     twelve_chars_px: Math.round(twelve)}); });
    t.querySelectorAll("td").forEach((td) => {
      if (td.scrollWidth > td.clientWidth + 1 && win.getComputedStyle(td).overflowX !== "visible")
        cells.push({table: i, text: td.textContent.trim().slice(0, 40)}); });
  });
  const folded = {tables: doc.querySelectorAll("table").length, cut: cut, page_width: doc.documentElement.scrollWidth,
                  page_height: doc.documentElement.scrollHeight, narrow_columns: narrow, cut_cells: cells};
  const lightContrast = idContrast(doc, win);
  doc.documentElement.dataset.theme = "dark"; doc.documentElement.dataset.mode = "dark";
  setTimeout(() => {
    const darkContrast = idContrast(doc, win);
    doc.documentElement.dataset.theme = "light"; doc.documentElement.dataset.mode = "light";
    doc.querySelectorAll("details:not(.above-input)").forEach((d) => { d.open = true; });   // every fold of values
    setTimeout(() => {
      const tall = [];
      doc.querySelectorAll("tr").forEach((tr) => {
        const h = tr.getBoundingClientRect().height;
        if (h > 600) tall.push({px: Math.round(h), text: tr.textContent.trim().slice(0, 60)}); });
      const text = doc.body.innerText;
      const raw = (text.match(/\|\s*:?-{3,}:?\s*\||\|\s*—\s*\|/g) || []).slice(0, 5);
      const hidden = [], viewport = doc.documentElement.clientWidth;
      doc.querySelectorAll('table.corekit-claims td[data-label="verdict"]').forEach((td) => {
        let right = viewport;
        for (let el = td.parentElement; el && el !== doc.body; el = el.parentElement) {
          const o = win.getComputedStyle(el).overflowX;
          if (o === "auto" || o === "scroll" || o === "hidden") right = Math.min(right, el.getBoundingClientRect().right); }
        const r = td.getBoundingClientRect();
        if (td.offsetParent === null || r.right > right + 1 || r.left < 0)
          hidden.push({claim: td.parentElement.textContent.trim().slice(0, 40), right: Math.round(r.right)}); });
      document.getElementById("result").textContent = "RESULT" + JSON.stringify(Object.assign(folded, {
        unfolded_height: doc.documentElement.scrollHeight, tall_rows: tall, raw_markdown: raw,
        id_contrast: {light: lightContrast, dark: darkContrast}, verdicts_hidden: hidden}));
    }, 500);
  }, 500);
}, 1500);
// The lowest contrast ratio (WCAG 2) of a claim id against the background behind it, over the claims tables' ids.
function idContrast(doc, win) {
  const rgba = (c) => (c.match(/[\d.]+/g) || [0, 0, 0, 0]).map(Number).concat([1]).slice(0, 4);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  let worst = null;
  doc.querySelectorAll("table.corekit-claims td:first-child code").forEach((code) => {
    let bg = null;
    for (let el = code; el && !bg; el = el.parentElement) {
      const c = rgba(win.getComputedStyle(el).backgroundColor); if (c[3] > 0.5) bg = c; }
    if (!bg) bg = rgba(win.getComputedStyle(doc.documentElement).backgroundColor);
    if (bg[3] <= 0.5) bg = [255, 255, 255, 1];
    const fg = rgba(win.getComputedStyle(code).color);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (!worst || ratio < worst.ratio) worst = {ratio: Math.round(ratio * 100) / 100, id: code.textContent.slice(0, 40),
                                              fg: win.getComputedStyle(code).color, bg: "rgb(" + bg.slice(0, 3) + ")"};
  });
  return worst;
}
document.body.appendChild(frame);
</script></body></html>
"""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve(html: Path) -> Iterator[str]:
    """Yield the base URL of ``html`` served by `python -m http.server` on 127.0.0.1 (stopped on exit)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(html)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline and server.poll() is None, "http.server did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    """Return the finished headless Chromium run with ``args`` (no network beyond the page, no GPU)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}"]
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True,
                          timeout=BROWSER_TIMEOUT_S)


def cut_tables(html: Path, base: str, page: str, width: int, profile: Path) -> dict:
    """Return {"tables", "cut": the tables too wide for their box, "page_width", "page_height", "narrow_columns",
    "cut_cells", "id_contrast" (light, dark), "unfolded_height", "tall_rows", "raw_markdown", "verdicts_hidden"} for
    ``page`` shown ``width`` px wide."""
    (html / "_table_probe.html").write_text(PROBE)
    url = f"{base}/_table_probe.html?page=/{page}&width={width}"
    dom = chromium("--virtual-time-budget=15000", f"--window-size={width + 40},1000", "--dump-dom", url,
                   profile=profile).stdout
    found = re.search(r"RESULT(\{.*?\})</pre>", dom)
    assert found, f"the table probe did not finish on {page} at {width} px:\n{dom[-1500:]}"
    return json.loads(found.group(1).replace("&quot;", '"'))

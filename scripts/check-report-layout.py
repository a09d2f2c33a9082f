"""Check a class report's layout in a real browser: nothing wider than the window.

    python scripts/check-report-layout.py GRADES/report.html [--widths 390 1280] [--shots DIR]

Loads the page in headless Chromium (Debian's ``chromium``; ``apt-get install -y chromium``) at
each width, on a copy that carries a small script of this checker's (the report itself has none):
it measures the page's scroll width against the window's, lists every element that reaches past
the window's right edge outside a box that scrolls sideways, and where the gradebook starts.
Headless Chromium keeps its window at least 500 px wide, so the page is shown in a frame of
exactly the width (a phone's layout viewport, as ``width=device-width`` makes it).
With ``--shots`` it also saves a screenshot of the whole page per width, to look at. Exit
status 1 when something overflows at some width. Run by hand after changing the report's page;
the engine's tests check its structure (viewport, scroll boxes) without a browser.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

#: Runs once the page has loaded; writes what it measured into the page, for --dump-dom.
MEASURE = """
<script>
addEventListener("load", () => {
  const width = window.innerWidth;
  const scrolls = (e) => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === "auto" || x === "scroll") return true;
    }
    return false;
  };
  const over = [];
  for (const e of document.body.querySelectorAll("*")) {
    const r = e.getBoundingClientRect();
    if (r.right > width + 0.5 && !scrolls(e)) {
      over.push(`${e.tagName.toLowerCase()}#${e.id} right=${Math.round(r.right)}`);
    }
  }
  const book = document.getElementById("gradebook");
  parent.postMessage(JSON.stringify({
    innerWidth: width,
    scrollWidth: document.documentElement.scrollWidth,
    scrollHeight: document.documentElement.scrollHeight,
    gradebookTop: book ? Math.round(book.getBoundingClientRect().top) : null,
    overflowing: over.slice(0, 20),
  }), "*");
});
</script>
"""

#: The window: the page in a frame of the width to check, and what the page reported.
FRAME = """<!DOCTYPE html>
<html><body style="margin:0">
<iframe src="{src}" style="border:0;display:block;width:{width}px;height:{height}px"></iframe>
<pre id="layout-check"></pre>
<script>
addEventListener("message", (e) => {{
  document.getElementById("layout-check").textContent = e.data;
}});
</script>
</body></html>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("no chromium found: apt-get install -y chromium")


def run(browser: str, profile: Path, width: int, height: int, *args: str) -> str:
    command = [
        browser,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={max(width, 500) + 20},{height}",
        "--virtual-time-budget=5000",
        *args,
    ]
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=120
    )
    return done.stdout


def measure(browser: str, page: Path, width: int, work: Path) -> dict:
    probe = work / f"probe-{width}.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"),
        encoding="utf-8",
    )
    window = work / f"window-{width}.html"
    window.write_text(FRAME.format(src=probe.name, width=width, height=900))
    dom = run(
        browser, work / f"profile-{width}", width, 900, "--dump-dom", window.as_uri()
    )
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.DOTALL)
    if not found:
        sys.exit(f"the page did not report its layout at {width} px:\n{dom[-2000:]}")
    return json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--widths", type=int, nargs="+", default=[390, 1280])
    parser.add_argument(
        "--shots", type=Path, help="folder for one screenshot per width"
    )
    args = parser.parse_args()
    browser = chromium()
    failed = False
    with tempfile.TemporaryDirectory(prefix="report-layout-") as tmp:
        work = Path(tmp)
        for width in args.widths:
            found = measure(browser, args.report.resolve(), width, work)
            fits = (
                found["scrollWidth"] <= found["innerWidth"] and not found["overflowing"]
            )
            failed |= not fits
            print(
                f"{width} px: scrollWidth {found['scrollWidth']} vs innerWidth "
                f"{found['innerWidth']}, page {found['scrollHeight']} px tall, gradebook "
                f"at {found['gradebookTop']} px: {'fits' if fits else 'OVERFLOWS'}"
            )
            for element in found["overflowing"]:
                print(f"  past the right edge: {element}")
            if args.shots:
                args.shots.mkdir(parents=True, exist_ok=True)
                shot = args.shots.resolve() / f"report-{width}.png"
                height = min(found["scrollHeight"], 8000)
                framed = work / f"shot-{width}.html"
                copy = work / f"page-{width}.html"
                shutil.copy(args.report, copy)
                framed.write_text(
                    FRAME.format(src=copy.name, width=width, height=height)
                )
                run(
                    browser,
                    work / f"shot-{width}",
                    width,
                    height,
                    f"--screenshot={shot}",
                    framed.as_uri(),
                )
                print(f"  screenshot: {shot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

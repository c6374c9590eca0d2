"""The report as a person sees it: report.html, rendered from a real run's evidence, opened in
headless Chromium; the verdict table and every figure must be rendered and visible, and a
screenshot is written next to the report."""
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from pipeline_helpers import built_pipeline

from fleet_decode.report import render

pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Runs in the page once it has loaded: what the browser actually laid out and decoded.
PROBE = """<script>
window.addEventListener("load", () => {
  const shown = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
                        return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"; };
  const table = document.getElementById("verdict");
  const result = {
    verdict_visible: !!table && shown(table),
    verdict_rows: table ? [...table.rows].map(r => [...r.cells].map(c => c.innerText.trim())) : [],
    figures: [...document.querySelectorAll("figure img")].map(img => ({
      alt: img.alt, decoded: img.complete && img.naturalWidth > 0 && img.naturalHeight > 0, visible: shown(img)})),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


class Probe(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inside, self.text = False, ""

    def handle_starttag(self, tag, attrs):
        self.inside = self.inside or (tag == "pre" and ("id", "probe") in attrs)

    def handle_data(self, data):
        if self.inside:
            self.text += data

    def handle_endtag(self, tag):
        if tag == "pre":
            self.inside = False


def chromium(*args):
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/setup.sh installs it)")
def test_the_verdict_and_every_figure_are_visible_in_a_browser(tmp_path_factory, tmp_path):
    repo = built_pipeline(tmp_path_factory)
    out = tmp_path / "results"
    out.mkdir()
    render(repo, repo / "results", out / "REPORT.md", out / "report.html", out / "report.json")
    html = (out / "report.html").read_text()
    figures_in_html = html.count("<figure>")
    assert figures_in_html >= 4

    probed = out / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    dom = chromium("--dump-dom", probed.as_uri())
    parser = Probe()
    parser.feed(dom.stdout)
    assert parser.text, f"the probe did not run: {dom.stderr[-2000:]}"
    seen = json.loads(parser.text)
    assert seen["verdict_visible"]
    rows = seen["verdict_rows"]
    assert rows[0] == ["milestone", "cpu"]
    assert [r[0] for r in rows[1:]] == ["M0", "M1", "M2", "M3", "M4", "bench", "generate"]
    assert all(r[1].startswith("PASS ") for r in rows[1:]), rows
    assert len(seen["figures"]) == figures_in_html
    for figure in seen["figures"]:
        assert figure["decoded"] and figure["visible"], figure

    screenshot = out / "report.png"
    shot = chromium(f"--screenshot={screenshot}", "--window-size=1400,2400", (out / "report.html").as_uri())
    assert screenshot.exists() and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(screenshot, tmp_path_factory.getbasetemp() / "report.png")  # kept for a person to look at

"""The Jinja report (every cell traced to file, rule, commit, host, freshness) and Snakemake's own."""
import json

import pytest

from pipeline_helpers import built_pipeline, fresh_clone, git, snakemake

from fleet_decode.report import render


pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def test_every_cell_names_its_provenance_and_stale_evidence_says_why(clone, tmp_path):
    script = clone / "remote" / "m3_layers.py"
    script.write_text(script.read_text() + "\n# an edit\n")
    (clone / "results" / "cpu" / "m0" / "build.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    render(clone, clone / "results", out / "REPORT.md", out / "report.html", out / "report.json")
    commit = git(clone, "log", "-1", "--format=%H", "--", "src").stdout.strip()[:12]
    rows = [line for line in (out / "REPORT.md").read_text().splitlines() if line.startswith("| m")]
    assert len(rows) > 10
    for row in rows:
        evidence = row.split("|")[1].strip()
        assert f"`results/cpu/{evidence}` · rule `" in row and f"`{commit}` · cpu · " in row
        fresh = "stale: remote/m3_layers.py (changed)" if evidence == "m3/layers.json" else "fresh"
        assert row.rstrip(" |").endswith(fresh)
    assert "results/cpu/m0/build.json: INVALID" in (out / "REPORT.md").read_text()
    assert "| m4/e2e.json | gate min_logits_cosine | **" in (out / "REPORT.md").read_text()
    md = (out / "REPORT.md").read_text()
    bench = md.split("## Benchmark on cpu")[1].split("## ")[0]  # the contenders table, with its provenance
    assert "`results/cpu/bench/bench.json` · rule `bench`" in bench
    table = [line.split(" | ") for line in bench.splitlines() if line.startswith("| HF eager") or
             line.startswith("| reference step")]
    assert len(table) >= 2 and all(len(r) == 11 for r in table)
    hf = next(r for r in table if r[0].startswith("| HF eager"))
    assert hf[8] == "1.00x" and hf[9].endswith("%") and float(hf[3]) > 0  # HF eager is its own baseline
    html = (out / "report.html").read_text()
    assert "<h2>Benchmark on cpu</h2>" in html and "<th>vs HF eager</th>" in html
    assert html.count("data:image/svg+xml;base64,") == 4  # latency, layer error, bandwidth, baselines
    assert "stale: remote/m3_layers.py (changed)" in html
    assert json.loads((out / "report.json").read_text())["rule"] == "report"


def test_snakemakes_own_report_has_the_captions(clone):
    snakemake(clone, "--report", "smk-report.html")
    html = (clone / "smk-report.html").read_text()
    assert "M1 on host" in html and "kernels.json" in html

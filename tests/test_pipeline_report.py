"""The Jinja report (every cell traced to file, rule, commit, host, freshness) and Snakemake's own."""
import json

import pytest

from pipeline_helpers import built_pipeline, fresh_clone, git, snakemake

from fleet_decode.report import render


pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def test_the_report_leads_with_the_verdict_and_names_provenance_once_per_file(clone, tmp_path):
    script = clone / "remote" / "m3_layers.py"
    script.write_text(script.read_text() + "\n# an edit\n")
    (clone / "results" / "cpu" / "m0" / "build.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    render(clone, clone / "results", out / "REPORT.md", out / "report.html", out / "report.json")
    md = (out / "REPORT.md").read_text()
    assert md.index("## Verdict") < md.index("## Benchmark on cpu") < md.index("## Milestones") < md.index("## Provenance")
    verdict = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in
               md.split("## Verdict")[1].split("##")[0].splitlines() if line.startswith(("| M", "| bench", "| generate"))}
    assert list(verdict) == ["M0", "M1", "M2", "M3", "M4", "bench", "generate"]
    assert verdict["M0"].startswith("**INVALID**")
    assert verdict["M3"].startswith("**STALE (was PASS)** worst layer ") and "from exact" in verdict["M3"]
    assert verdict["M4"].startswith("**PASS** 3/3 tokens as exact")  # host_entry decodes 3
    assert verdict["bench"].startswith("**PASS** P50 ") and "% of floor" in verdict["bench"] and "tokens/s" in verdict["bench"]
    assert "- **INVALID** `results/cpu/m0/build.json`: " in md  # named by its path in the repository
    assert str(clone) not in md
    commit = git(clone, "log", "-1", "--format=%H", "--", "src").stdout.strip()[:12]
    provenance = [line for line in md.split("## Provenance")[1].splitlines() if line.startswith("| `results/")]
    assert len(provenance) == 9  # each valid evidence file once
    for line in provenance:
        assert f"`{commit}` | cpu |" in line
        assert line.rstrip(" |").endswith("stale: remote/m3_layers.py (changed)" if "m3/layers" in line else "fresh")
    table = md.split("## Milestones")[1].split("## Provenance")[0]
    assert "results/cpu" not in table and " · " not in table  # values only; provenance is stated once
    assert "| m4/e2e.json | gate splits_from_exact_beyond_near_ties | **0** PASS (== 0) |" in table
    layers = [line.split("|")[2].strip() for line in table.splitlines() if line.startswith("| m3/layers.json | gate layer_")]
    assert layers == sorted(layers, key=lambda item: int(item.split("_")[1].split(".")[0]))
    bench = md.split("## Benchmark on cpu")[1].split("## ")[0]
    assert "From `results/cpu/bench/bench.json` and `results/cpu/bench/baselines.json`;" in bench
    table = [line.split(" | ") for line in bench.splitlines() if line.startswith("| HF eager") or
             line.startswith("| reference step")]
    assert len(table) >= 2 and all(len(r) == 12 for r in table)
    assert {r[1] for r in table} == {"baselines"}  # the rule that timed them
    hf = next(r for r in table if r[0].startswith("| HF eager"))
    # HF eager is its own baseline; its share of the floor is read against the bench run's floor
    assert hf[9] == "1.00x" and hf[10].endswith("%") and float(hf[4]) > 0 and float(hf[11].rstrip(" |")) > 0
    html = (out / "report.html").read_text()
    assert html.index('<table id="verdict">') < html.index("<h2>Figures</h2>") < html.index("<h2>Benchmark on cpu</h2>")
    assert '<span class="invalid">INVALID</span> <code>results/cpu/m0/build.json</code>' in html
    assert html.count("data:image/svg+xml;base64,") == 4  # latency, layer error, bandwidth, baselines
    assert "stale: remote/m3_layers.py (changed)" in html
    stamp = json.loads((out / "report.json").read_text())
    assert stamp["rule"] == "report" and stamp["metrics"]["verdicts"]["cpu"]["M0"] == "INVALID"


def test_rows_of_one_task_kind_line_up_whatever_its_case():
    from fleet_decode.report import item_key, natural

    assert item_key("ARGMAX.max_rel") == item_key("argmax.max_rel")
    assert sorted(["layer_10.rel_err", "layer_3.rel_err", "layer_1.rel_err"], key=natural) == \
        ["layer_1.rel_err", "layer_3.rel_err", "layer_10.rel_err"]


def test_snakemakes_own_report_has_the_captions(clone):
    snakemake(clone, "--report", "smk-report.html")
    html = (clone / "smk-report.html").read_text()
    assert "M1 on host" in html and "kernels.json" in html

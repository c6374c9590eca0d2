# Helpers shared by the rules: config validation, declared sources and content-hash triggers.
#
# Snakemake decides by mtimes, which a fresh clone scrambles and `touch` changes. So every real
# source is an ancient() input (its mtime never triggers anything) and each evidence file gets one
# trigger file, rewritten here at parse time: mtime 0 while the evidence's recorded source hashes
# and host settings match the tree, mtime "now" (so the job reruns) when they do not. The profile
# (profiles/default) restricts --rerun-triggers to mtime, so only this decides.
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(workflow.basedir)
sys.path.insert(0, str(ROOT / "src"))  # fleet_decode may be importable only from this tree

from fleet_decode.pipeline import config as pipeline_config
from fleet_decode.pipeline.audit import evidence_state
from fleet_decode.pipeline.evidence import InvalidEvidence, read_evidence, stale_reasons
from fleet_decode.pipeline.sources import EVIDENCE, changed_sources, declared_files, hash_sources
from fleet_decode.pipeline.run import deploy, run_rule

try:
    pipeline_config.validate(config, ROOT / "config" / "config.schema.yaml")
except pipeline_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

TARGETS = config["targets"]
REPORT_STAMP = "results/report.json"

wildcard_constraints:
    host="|".join(map(re.escape, config["hosts"])),
    layer="[01]",


def rule_sources(rule_name):
    return ancient([str(ROOT / p) for p in declared_files(ROOT, rule_name)])


def evidence(rel):
    return f"results/{{host}}/{rel}"


def trigger(rel):
    return f".work/triggers/{{host}}/{rel}.trigger"


def _write_trigger(path, reasons):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{r}\n" for r in reasons) or "fresh\n")
    stamp = time.time() if reasons else 0
    os.utime(path, (stamp, stamp))


def _refresh_triggers():
    hashes = {}
    for host in TARGETS:
        params = pipeline_config.host_params(config["hosts"][host])
        for rels in EVIDENCE.values():
            for rel in rels:
                state = evidence_state(f"results/{host}/{rel}", ROOT, params, hashes)
                _write_trigger(f".work/triggers/{host}/{rel}.trigger",
                               [] if state.state == "fresh" else state.reasons)
    try:
        recorded = read_evidence(REPORT_STAMP)["sources"]
        reasons = changed_sources(recorded, hash_sources(ROOT, "report"))
    except InvalidEvidence as error:
        reasons = [str(error)]
    _write_trigger(".work/triggers/report.trigger", reasons)


_refresh_triggers()


def run_on_host(wildcards, rule_name, output_path, rel, *extra):
    run_rule(config, wildcards.host, rule_name, output_path, rel, ROOT, extra)

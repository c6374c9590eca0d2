# Helpers shared by the rules: config validation, declared sources and content-hash triggers.
#
# Snakemake decides by mtimes, which a fresh clone scrambles and `touch` changes. So every real
# source is an ancient() input (its mtime never triggers anything) and each evidence file gets one
# trigger file, rewritten here at parse time: mtime 0 while the evidence's recorded source hashes
# and host settings match the tree, mtime "now" (so the job reruns) when they do not. Fresh
# evidence gets back the mtime of when it was made (its envelope's finished_at), so the chain
# m0_host -> m0_build -> m1 -> m2 -> m3 -> m4 -> bench -> report orders by content, not by checkout:
# a rerun upstream still reruns what follows it. The profile (profiles/default) restricts
# --rerun-triggers to mtime, so only this decides.
import datetime
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(workflow.basedir)
sys.path.insert(0, str(ROOT / "src"))  # fleet_decode may be importable only from this tree

from fleet_decode.pipeline import config as pipeline_config
from fleet_decode.pipeline import audit, safekeep
from fleet_decode.pipeline.audit import evidence_state, report_state
from fleet_decode.pipeline.milestones import MILESTONES
from fleet_decode.pipeline.sources import EVIDENCE, declared_files
from fleet_decode.pipeline.run import deploy, preflight, run_rule

# `--config strict=true` is a switch of this invocation, not a setting of the config file
STRICT = bool(config.pop("strict", False))
MAIN = getattr(workflow, "is_main_process", True)  # not in a job's own process (cluster, SLURM)

try:
    # Rebuilt from the files and --config values, so that --configfile X means X, as check-config X reads it.
    validated = pipeline_config.workflow_config(
        workflow.config_settings.configfiles or [ROOT / "config" / "config.yaml"],
        {k: v for k, v in workflow.config_settings.config.items() if k != "strict"},
        ROOT / "config" / "config.schema.yaml")
    config.clear()
    config.update(validated)
except pipeline_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

TARGETS = config["targets"]
REPORT_STAMP = f"results/{audit.REPORT_STAMP}"

wildcard_constraints:
    host="|".join(map(re.escape, config["hosts"])),
    layer="|".join(MILESTONES["m2"].wildcards["layer"]),


def rule_sources(rule_name):
    return ancient([str(ROOT / p) for p in declared_files(ROOT, rule_name)])


def evidence(milestone):
    """The milestone's evidence file (with the {host} wildcard and any of its own)."""
    return f"results/{{host}}/{MILESTONES[milestone].evidence}"


def every_evidence(milestone):
    """All of a milestone's evidence files for one {host}: every value of its own wildcards."""
    return [f"results/{{host}}/{rel}" for rel in MILESTONES[milestone].evidence_files()]


def trigger(milestone):
    return f".work/triggers/{{host}}/{MILESTONES[milestone].evidence}.trigger"


def script_of(milestone):
    return MILESTONES[milestone].script


def _set_mtime(path, stamp):
    os.utime(path, (stamp, stamp))


def _made_at(doc):
    return datetime.datetime.fromisoformat(doc["finished_at"]).timestamp()


def _write_trigger(path, reasons):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{r}\n" for r in reasons) or "fresh\n")
    _set_mtime(path, time.time() if reasons else 0)


def _say_why(what, reasons):
    """Snakemake names only the trigger file as a job's reason; this names the source that changed."""
    if MAIN:
        print(f"to redo {what}: {'; '.join(reasons)}", file=sys.stderr)


def _refresh_triggers():
    hashes = {}
    for host in TARGETS:
        _write_trigger(f".work/triggers/{host}/deploy.trigger", ["deploy on request"])
        params = pipeline_config.host_params(config["hosts"][host])
        for rels in EVIDENCE.values():
            for rel in rels:
                state = evidence_state(f"results/{host}/{rel}", ROOT, params, hashes)
                fresh = state.state == "fresh"
                _write_trigger(f".work/triggers/{host}/{rel}.trigger", [] if fresh else state.reasons)
                if not fresh:
                    _say_why(f"results/{host}/{rel}", state.reasons)
                if fresh:
                    _set_mtime(state.path, _made_at(state.doc))
    # stale when a report source or any host's evidence changed (pipeline.audit.report_state)
    shown = report_state(ROOT, "results")  # ("report" is a Snakemake keyword at the start of a line)
    _write_trigger(".work/triggers/report.trigger", shown.reasons)
    if shown.reasons:
        _say_why("the report", shown.reasons)
    report_outputs = [Path(p) for p in (REPORT_STAMP, "results/REPORT.md", "results/report.html")]
    if shown.state == "fresh" and all(p.exists() for p in report_outputs):
        for path in report_outputs:
            _set_mtime(path, _made_at(shown.doc))


def _outputs_a_run_may_redo():
    evidence = [f"results/{host}/{rel}" for host in TARGETS for rels in EVIDENCE.values() for rel in rels]
    return [*evidence, REPORT_STAMP, "results/REPORT.md", "results/report.html"]


def _restore_kept(why):
    for rel in safekeep.restore_missing(ROOT):
        print(f"restored {rel} ({why})", file=sys.stderr)


if MAIN:  # put back what a killed run left deleted, before judging what is fresh
    _restore_kept("kept from a run that did not finish")
_refresh_triggers()
if MAIN:
    safekeep.keep(ROOT, _outputs_a_run_may_redo())


def planned_hosts():
    """The hosts that jobs about to run will reach."""
    return {job.wildcards_dict["host"] for job in workflow.dag.needrun_jobs() if "host" in job.wildcards_dict}


def check_before_running():
    """onstart: refuse the whole run before any job starts (and Snakemake removes its outputs) when
    the tree is refused or no planned host answers. When only some hosts do not answer, the others
    go on (keep-going): the silent hosts' jobs fail at their deploy, before any of their evidence is
    touched."""
    hosts = planned_hosts()
    problems, unreachable = preflight(config, hosts, ROOT) if hosts else ([], {})
    if unreachable and len(unreachable) == len(set(hosts)):
        problems += unreachable.values()
    if problems:
        raise WorkflowError("nothing was run: " + "; ".join(problems))
    for why in unreachable.values():
        print(f"going on without it: {why}", file=sys.stderr, flush=True)


def print_verdict():
    """The end of `snakemake report`: one screen per host; under `--config strict=true` a failing
    gate (or invalid evidence) of a target fails the run."""
    from fleet_decode.report import verdicts
    from fleet_decode.report.verdict import summary

    verdict = verdicts(ROOT, Path("results"))
    print(f"\n{summary(verdict)}\n", flush=True)
    failing = [f"{host} {v.milestone} {v.label}" for host in TARGETS for v in verdict.get(host, [])
               if "FAIL" in v.label or v.state == "INVALID"]
    if STRICT and failing:
        raise WorkflowError("strict: " + ", ".join(failing))


def finish():
    """onsuccess / onerror: put back the evidence of every job that did not finish."""
    _restore_kept("its job did not finish; the evidence from before is kept")


def run_on_host(wildcards, rule_name, output_path):
    milestone, own = MILESTONES[rule_name], {k: wildcards[k] for k in MILESTONES[rule_name].wildcards}
    run_rule(config, wildcards.host, rule_name, output_path, milestone.evidence.format(**own), ROOT,
             [argument.format(**own) for argument in milestone.arguments])

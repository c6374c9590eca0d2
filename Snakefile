"""fleet-decode workflow: deploy to each target host, run milestones M0-M4 and the benchmark there,
fetch the evidence, render the report. Staleness is by content hash (rules/common.smk).

  snakemake report                 # everything for the config's targets, results/REPORT.md, the verdict
  snakemake report --config strict=true   # the same, and a failing gate fails the run
  snakemake -n                     # what would rerun, and why (see .work/triggers/)
  snakemake report --config targets='[h200]'
  snakemake --report report.html   # Snakemake's own report, with captions
"""

configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/deploy.smk"
include: "rules/m0.smk"
include: "rules/m1.smk"
include: "rules/m2.smk"
include: "rules/m3.smk"
include: "rules/m4.smk"
include: "rules/bench.smk"
include: "rules/generate.smk"
include: "rules/baselines.smk"
include: "rules/report.smk"


onstart:
    check_before_running()


onsuccess:
    finish()


onerror:
    finish()


# The default target (and Snakemake's own --report): everything, rendered; `snakemake report` also
# prints the verdict.
rule all:
    input:
        rules.render_report.output,
    default_target: True

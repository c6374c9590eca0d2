# The report over every host's evidence (targets as inputs; other hosts' committed evidence shown too).
rule render_report:
    input:
        evidence=[f"results/{host}/{rel}" for host in TARGETS for rels in EVIDENCE.values() for rel in rels],
        sources=rule_sources("report"),
        trigger=".work/triggers/report.trigger",
    output:
        md="results/REPORT.md",
        html=report("results/report.html", caption="../report_templates/captions/report.rst",
                    category="Report"),
        stamp=REPORT_STAMP,
    run:
        from fleet_decode.report import render

        render(ROOT, Path("results"), output.md, output.html, output.stamp)


# `snakemake report`: render if anything changed, then end with the verdict per host. A rule without
# outputs runs every time, so the verdict is printed even when everything was fresh.
rule report:
    input:
        rules.render_report.output,
    run:
        print_verdict()

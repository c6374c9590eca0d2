# M3: one decode step through all layers vs exact arithmetic (HF eager reported beside).
rule m3:
    input:
        sources=rule_sources("m3"),
        trigger=trigger("m3"),
        after=every_evidence("m2"),
    output:
        report(evidence("m3"), caption="../report_templates/captions/m3.rst",
               category="M3 step", subcategory="{host}"),
    params:
        script=script_of("m3"),
    run:
        run_on_host(wildcards, "m3", output[0])

# M2: layer 0 (dense) and layer 1 (MoE), one decode step each, vs the reference.
rule m2:
    input:
        sources=rule_sources("m2"),
        trigger=trigger("m2"),
        after=evidence("m1"),
    output:
        report(evidence("m2"), caption="../report_templates/captions/m2.rst",
               category="M2 layer", subcategory="{host}"),
    params:
        script=script_of("m2"),
    run:
        run_on_host(wildcards, "m2", output[0])

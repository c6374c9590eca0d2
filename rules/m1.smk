# M1: every task kind alone vs its reference.
rule m1:
    input:
        sources=rule_sources("m1"),
        trigger=trigger("m1"),
        after=evidence("m0_build"),
    output:
        report(evidence("m1"), caption="../report_templates/captions/m1.rst",
               category="M1 kernels", subcategory="{host}"),
    params:
        script=script_of("m1"),
    run:
        run_on_host(wildcards, "m1", output[0])

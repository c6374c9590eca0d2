# M1: every task kernel alone vs a torch reference.
rule m1:
    input:
        sources=rule_sources("m1"),
        trigger=trigger("m1/kernels.json"),
        after=evidence("m0/build.json"),
    output:
        report(evidence("m1/kernels.json"), caption="../report_templates/captions/m1.rst",
               category="M1 kernels", subcategory="{host}"),
    run:
        run_on_host(wildcards, "m1", output[0], "m1/kernels.json")

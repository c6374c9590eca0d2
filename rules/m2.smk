# M2: layer 0 (dense) and layer 1 (MoE), one decode step each, vs the reference.
rule m2:
    input:
        sources=rule_sources("m2"),
        trigger=trigger("m2/layer_{layer}.json"),
        after=evidence("m1/kernels.json"),
    output:
        report(evidence("m2/layer_{layer}.json"), caption="../report_templates/captions/m2.rst",
               category="M2 layer", subcategory="{host}"),
    run:
        run_on_host(wildcards, "m2", output[0], f"m2/layer_{wildcards.layer}.json",
                    "--layer", wildcards.layer)

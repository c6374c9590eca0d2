# M3: one decode step through all layers vs exact arithmetic (HF eager reported beside).
rule m3:
    input:
        sources=rule_sources("m3"),
        trigger=trigger("m3/layers.json"),
        after=[evidence("m2/layer_0.json"), evidence("m2/layer_1.json")],
    output:
        report(evidence("m3/layers.json"), caption="../report_templates/captions/m3.rst",
               category="M3 step", subcategory="{host}"),
    run:
        run_on_host(wildcards, "m3", output[0], "m3/layers.json")

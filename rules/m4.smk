# M4: free-running greedy decode after HF prefill vs the exact greedy decoder.
rule m4:
    input:
        sources=rule_sources("m4"),
        trigger=trigger("m4"),
        after=evidence("m3"),
    output:
        report(evidence("m4"), caption="../report_templates/captions/m4.rst",
               category="M4 e2e", subcategory="{host}"),
    params:
        script=script_of("m4"),
    run:
        run_on_host(wildcards, "m4", output[0])

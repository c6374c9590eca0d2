# bench: per-token latency, bandwidth against the floor, baselines; after M4 proved the decode right.
rule bench:
    input:
        sources=rule_sources("bench"),
        trigger=trigger("bench"),
        after=evidence("m4"),
    output:
        report(evidence("bench"), caption="../report_templates/captions/bench.rst",
               category="bench", subcategory="{host}"),
    params:
        script=script_of("bench"),
    run:
        run_on_host(wildcards, "bench", output[0])

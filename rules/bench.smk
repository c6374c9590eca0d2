# bench: per-token latency, bandwidth against the floor, baselines; after M4 proved the decode right.
rule bench:
    input:
        sources=rule_sources("bench"),
        trigger=trigger("bench/bench.json"),
        after=evidence("m4/e2e.json"),
    output:
        report(evidence("bench/bench.json"), caption="../report_templates/captions/bench.rst",
               category="bench", subcategory="{host}"),
    run:
        run_on_host(wildcards, "bench", output[0], "bench/bench.json")

# generate: the decoder people use, end to end; after the bench, so it never shares the GPU with it.
rule generate:
    input:
        sources=rule_sources("generate"),
        trigger=trigger("generate"),
        after=evidence("bench"),
    output:
        report(evidence("generate"), caption="../report_templates/captions/generate.rst",
               category="generate", subcategory="{host}"),
    params:
        script=script_of("generate"),
    run:
        run_on_host(wildcards, "generate", output[0])

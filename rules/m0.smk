# M0: the host's fingerprint (changes only with the host or the model code), then the build.
rule m0_host:
    input:
        sources=rule_sources("m0_host"),
        trigger=trigger("m0_host"),
    output:
        report(evidence("m0_host"), caption="../report_templates/captions/m0.rst",
               category="M0 host", subcategory="{host}"),
    params:
        script=script_of("m0_host"),
    run:
        run_on_host(wildcards, "m0_host", output[0])


rule m0_build:
    input:
        sources=rule_sources("m0_build"),
        trigger=trigger("m0_build"),
        after=evidence("m0_host"),
    output:
        report(evidence("m0_build"), caption="../report_templates/captions/m0.rst",
               category="M0 host", subcategory="{host}"),
    params:
        script=script_of("m0_build"),
    run:
        run_on_host(wildcards, "m0_build", output[0])

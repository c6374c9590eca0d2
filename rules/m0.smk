# M0: the host's fingerprint (changes only with the host or the model code), then the build.
rule m0_host:
    input:
        sources=rule_sources("m0_host"),
        trigger=trigger("m0/host.json"),
    output:
        report(evidence("m0/host.json"), caption="../report_templates/captions/m0.rst",
               category="M0 host", subcategory="{host}"),
    run:
        run_on_host(wildcards, "m0_host", output[0], "m0/host.json")


rule m0_build:
    input:
        sources=rule_sources("m0_build"),
        trigger=trigger("m0/build.json"),
        after=evidence("m0/host.json"),
    output:
        report(evidence("m0/build.json"), caption="../report_templates/captions/m0.rst",
               category="M0 host", subcategory="{host}"),
    run:
        run_on_host(wildcards, "m0_build", output[0], "m0/build.json")

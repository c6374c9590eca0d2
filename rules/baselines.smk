# baselines: the torch contenders (HF eager, the reference step, HF under torch.compile), timed apart from
# the megakernel so that a decoder change does not rerun them. After m0_host only (whose sources it
# shares, so that edge stales nothing extra), and last among the jobs ready to run (priority). No edge
# from the decoder's chain: any would make a decoder rerun rerun this too, and Snakemake 9 never looks
# at a job behind an ancient() edge of a job that reruns. The host's lock (pipeline.run.one_at_a_time)
# keeps it off the GPU while another milestone of the host runs, whatever `-j` says.
rule baselines:
    input:
        sources=rule_sources("baselines"),
        trigger=trigger("baselines"),
        after=evidence("m0_host"),
    output:
        report(evidence("baselines"), caption="../report_templates/captions/baselines.rst",
               category="bench", subcategory="{host}"),
    params:
        script=script_of("baselines"),
    priority: -10
    run:
        run_on_host(wildcards, "baselines", output[0])

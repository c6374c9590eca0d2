# Deploy on its own (`snakemake deploy`): every host rule also deploys the tree it needs, and a tree
# already on the host is reused, so this is for checking a host before a long run.
rule deploy_host:
    input:
        # rewritten "now" at every parse (rules/common.smk): asking for a deploy always checks the host
        trigger=".work/triggers/{host}/deploy.trigger",
    output:
        ".work/deployed/{host}.json",
    run:
        import json

        Path(output[0]).write_text(json.dumps(deploy(config, wildcards.host, ROOT), indent=1))


rule deploy:
    input:
        expand(".work/deployed/{host}.json", host=TARGETS),

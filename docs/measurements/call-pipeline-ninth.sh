# The ninth session's pipeline run (2026-12-04): `snakemake report --config 'targets=[h200]'` on the committed
# tree (the deploy manifest written on the laptop first: python -m fleet_decode.pipeline.deploy). Carry .whl and
# DEPLOY_MANIFEST.json. The pipeline builds the kernels from hip/ itself.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 585 snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "all $(( $(date +%s) - t0 )) s"

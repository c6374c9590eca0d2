# The pipeline on whichever GPU the device tool lends (`snakemake report --config 'targets=[TARGET]'`, TARGET h200 or
# h100, default h200; the h100 target needs no needs_h200 since the exact twin holds no fp32 copy of the weights).
# Write the deploy manifest on the laptop first (python -m fleet_decode.pipeline.deploy) and carry .whl and
# DEPLOY_MANIFEST.json. PIPELINE_S (default 540) caps the pipeline: the rules finished by then come back. WHEELS: the
# folder of the wheels (default .whl; docs/next/pool/call-pick-pipeline.sh runs this in a tree without them).
#   TARGET=h100 bash docs/next/pipeline/call-pipeline.sh    (from the repository root)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl}/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
TARGET=${TARGET:-h200}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout ${PIPELINE_S:-540} snakemake report --config "targets=[$TARGET]" > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -12 $OUT/snakemake.log
tar czf $OUT/$TARGET.tgz results/$TARGET
echo "pipeline $(( $(date +%s) - t0 )) s"

# Fifteenth session (2026-12-06): the pipeline on the H200 at the baselines rule's commit (`snakemake report
# --config 'targets=[h200]'`; write the deploy manifest on the laptop first: python -m fleet_decode.pipeline.deploy;
# carry .whl and DEPLOY_MANIFEST.json; needs_h200, since M3 does not fit an H100's 80 GB), then, in the time left,
# traces 123 and 124 of the decode default (the two-entry kernel) at 1,024 and 4,096 positions on the library the
# pipeline built, for docs/megakernel.md's per-layer table. PIPELINE_S (default 540) caps the pipeline and BUDGET
# (default 585) the whole call, for a budget short of a full run: the rules finished by then come back (the
# baselines rule runs last, by its priority).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${PIPELINE_S:-540} snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -12 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "pipeline $(( $(date +%s) - t0 )) s"
T=$(mktemp -d /tmp/call.XXXXXX)
trace() {  # name, prompt
  left=$(( ${BUDGET:-585} - ($(date +%s) - t0) ))
  [ $left -gt 45 ] || return
  PYTHONPATH=$PWD/src:/tmp/site timeout $left python3 -m fleet_decode.kernels.trace --prompt $2 --variant default \
    --out $T/$1.json 2>&1 | grep -v Warning | grep -v " us  " | tail -16
  echo "$1 $(( $(date +%s) - t0 )) s"
}
trace trace123 1024
trace trace124 4096
tar czf $OUT/traces.tgz -C $T .
